// The Kubernetes, Gateway API and Prometheus Operator schemas (kubernetes-models,
// @kubernetes-models/gateway-api, @kubernetes-models/prometheus-operator) for every kind the
// manifests use. Two checks per object:
//  - the model's validate(): JSON Schema (types, required fields, enums, formats);
//  - unknown fields: the JSON Schema accepts them (the API server rejects them under kubectl's
//    strict field validation), so each object is also type-checked as an object literal against the
//    model's TypeScript interface, whose excess-property check names any misspelt field.
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Gateway, HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';
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

/**
 * BackendTLSPolicy v1 (Gateway API 1.4) is not in @kubernetes-models/gateway-api 0.5 (it has the
 * v1alpha2 of Gateway API 1.0, a different shape); 2.x has it. Until then its fields are checked
 * here, as the v1 CRD defines them: known fields only, the required ones present.
 */
function backendTlsPolicyProblems(object: KubernetesObject): string[] {
  const problems: string[] = [];
  const spec = object.spec ?? {};
  const known = (value: Record<string, unknown>, where: string, allowed: string[]) => {
    for (const key of Object.keys(value))
      if (!allowed.includes(key)) problems.push(`${where}.${key} is not a known field`);
  };
  known(object, '', ['apiVersion', 'kind', 'metadata', 'spec']);
  known(spec, 'spec', ['targetRefs', 'validation', 'options']);
  const isName = (value: unknown) =>
    typeof value === 'string' && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(value) && value.length <= 253;
  const references = (list: unknown, where: string, allowed: string[]) => {
    if (!Array.isArray(list) || list.length === 0) {
      problems.push(`${where} must be a non-empty list`);
      return;
    }
    list.forEach((ref: Record<string, unknown>, index) => {
      known(ref, `${where}[${index}]`, allowed);
      if (typeof ref.group !== 'string') problems.push(`${where}[${index}].group is required ("" for the core group)`);
      if (typeof ref.kind !== 'string' || ref.kind === '') problems.push(`${where}[${index}].kind is required`);
      if (!isName(ref.name)) problems.push(`${where}[${index}].name must be an object name`);
    });
  };
  references(spec.targetRefs, 'spec.targetRefs', ['group', 'kind', 'name', 'sectionName']);
  const validation = spec.validation ?? {};
  known(validation, 'spec.validation', ['caCertificateRefs', 'wellKnownCACertificates', 'hostname', 'subjectAltNames']);
  if (!isName(validation.hostname) || validation.hostname.includes('..'))
    problems.push('spec.validation.hostname must be a DNS name');
  const byCa = validation.caCertificateRefs !== undefined;
  if (byCa === (validation.wellKnownCACertificates !== undefined))
    problems.push('spec.validation needs exactly one of caCertificateRefs and wellKnownCACertificates');
  if (byCa) references(validation.caCertificateRefs, 'spec.validation.caCertificateRefs', ['group', 'kind', 'name']);
  else if (validation.wellKnownCACertificates !== 'System')
    problems.push('spec.validation.wellKnownCACertificates must be "System"');
  return problems;
}

const CHECKED_HERE: Record<string, (object: KubernetesObject) => string[]> = {
  'gateway.networking.k8s.io/v1/BackendTLSPolicy': backendTlsPolicyProblems,
};

const checkedHere = (object: KubernetesObject) => CHECKED_HERE[`${object.apiVersion}/${object.kind}`];

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
    const check = checkedHere(object);
    if (check !== undefined) {
      problems.push(...check(object).map((problem) => `${label(object)}: ${problem}`));
      continue;
    }
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
export function unknownFieldProblems(all: readonly KubernetesObject[]): string[] {
  // schemaProblems names the unknown fields of the kinds checked here.
  const objects = all.filter((object) => checkedHere(object) === undefined);
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
