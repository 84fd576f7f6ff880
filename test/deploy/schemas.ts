// The Kubernetes, Gateway API and Prometheus Operator schemas (kubernetes-models,
// @kubernetes-models/gateway-api, @kubernetes-models/prometheus-operator) for every kind the
// manifests use. Two checks per object:
//  - the model's validate(): JSON Schema (types, required fields, enums, formats);
//  - unknown fields: the JSON Schema accepts them (the API server rejects them under kubectl's
//    strict field validation), so each object is also type-checked as an object literal against the
//    model's TypeScript interface, whose excess-property check names any misspelt field.
// Neither sees a CRD's CEL rules (x-kubernetes-validations); manifests.test.ts asserts those it needs.
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { BackendTLSPolicy, Gateway, HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';
import {
  PodMonitor,
  PrometheusRule,
  ServiceMonitor,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import type { KubernetesObject } from './manifests.js';

interface Model {
  readonly model: new (data: never) => { validate(): void };
  /** The module and interface for the unknown-field check. */
  readonly module: string;
  readonly typeName: string;
}

const MODELS: Record<string, Model> = {
  'v1/ConfigMap': { model: ConfigMap, module: 'kubernetes-models/v1/ConfigMap', typeName: 'IConfigMap' },
  'v1/Pod': { model: Pod, module: 'kubernetes-models/v1/Pod', typeName: 'IPod' },
  'v1/Secret': { model: Secret, module: 'kubernetes-models/v1/Secret', typeName: 'ISecret' },
  'v1/Service': { model: Service, module: 'kubernetes-models/v1/Service', typeName: 'IService' },
  'v1/ServiceAccount': {
    model: ServiceAccount,
    module: 'kubernetes-models/v1/ServiceAccount',
    typeName: 'IServiceAccount',
  },
  'apps/v1/Deployment': { model: Deployment, module: 'kubernetes-models/apps/v1/Deployment', typeName: 'IDeployment' },
  'autoscaling/v2/HorizontalPodAutoscaler': {
    model: HorizontalPodAutoscaler,
    module: 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler',
    typeName: 'IHorizontalPodAutoscaler',
  },
  'policy/v1/PodDisruptionBudget': {
    model: PodDisruptionBudget,
    module: 'kubernetes-models/policy/v1/PodDisruptionBudget',
    typeName: 'IPodDisruptionBudget',
  },
  'networking.k8s.io/v1/Ingress': {
    model: Ingress,
    module: 'kubernetes-models/networking.k8s.io/v1/Ingress',
    typeName: 'IIngress',
  },
  'networking.k8s.io/v1/NetworkPolicy': {
    model: NetworkPolicy,
    module: 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy',
    typeName: 'INetworkPolicy',
  },
  'gateway.networking.k8s.io/v1/Gateway': {
    model: Gateway,
    module: '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/Gateway',
    typeName: 'IGateway',
  },
  'gateway.networking.k8s.io/v1/HTTPRoute': {
    model: HTTPRoute,
    module: '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute',
    typeName: 'IHTTPRoute',
  },
  'gateway.networking.k8s.io/v1/BackendTLSPolicy': {
    model: BackendTLSPolicy,
    module: '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/BackendTLSPolicy',
    typeName: 'IBackendTLSPolicy',
  },
  'monitoring.coreos.com/v1/ServiceMonitor': {
    model: ServiceMonitor,
    module: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor',
    typeName: 'IServiceMonitor',
  },
  'monitoring.coreos.com/v1/PodMonitor': {
    model: PodMonitor,
    module: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor',
    typeName: 'IPodMonitor',
  },
  'monitoring.coreos.com/v1/PrometheusRule': {
    model: PrometheusRule,
    module: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule',
    typeName: 'IPrometheusRule',
  },
};

function modelOf(object: KubernetesObject): Model {
  const model = MODELS[`${object.apiVersion}/${object.kind}`];
  if (model === undefined)
    throw new Error(
      `${object.apiVersion} ${object.kind} ${object.metadata?.name}: no schema known to test/deploy/schemas.ts (add its model)`,
    );
  return model;
}

const label = (object: KubernetesObject) => `${object.kind}/${object.metadata?.name}`;

/** JSON Schema problems, one line per object that fails. */
export function schemaProblems(objects: readonly KubernetesObject[]): string[] {
  const problems: string[] = [];
  for (const object of objects) {
    try {
      const { model: Model } = modelOf(object);
      new Model(object as never).validate();
    } catch (error) {
      problems.push(`${label(object)}: ${(error as Error).message}`);
    }
  }
  return problems;
}

/** Fields the models do not know (misspelt or from a newer API), named by object. */
export function unknownFieldProblems(objects: readonly KubernetesObject[]): string[] {
  // The virtual file sits in test/deploy so that module resolution finds node_modules.
  const file = fileURLToPath(new URL('__rendered-manifests__.ts', import.meta.url));
  const models = objects.map(modelOf);
  const imports = [...new Set(models.map((m) => `import type { ${m.typeName} } from '${m.module}';`))];
  const lines = [
    ...imports,
    ...objects.map(
      (object, index) =>
        `export const object${index} = ${JSON.stringify(object)} satisfies ${models[index]!.typeName};`,
    ),
  ];
  const text = lines.join('\n');

  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    target: ts.ScriptTarget.ES2023,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (name, language, ...rest) =>
    name === file ? ts.createSourceFile(name, text, language) : getSourceFile(name, language, ...rest);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);

  const source = program.getSourceFile(file)!;
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
    if (diagnostic.file !== source || diagnostic.start === undefined) return message;
    const line = source.getLineAndCharacterOfPosition(diagnostic.start).line - imports.length;
    const object = objects[line];
    return object === undefined ? message : `${label(object)}: ${message}`;
  });
}
