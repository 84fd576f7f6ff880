// The request rules by operation name: only these routes have their bodies read.
import { NamedOperations } from '../../operations.js';
import type { RequestRule } from '../violation.js';
import { getUpdateByOffsetRule } from './get-update-by-offset.js';
import { submitAndWaitForTransactionRule } from './submit-and-wait-for-transaction.js';
import { updateIdentityProviderConfigRule } from './update-identity-provider-config.js';
import { updateVettedPackagesRule } from './update-vetted-packages.js';

export const REQUEST_RULES: ReadonlyMap<string, RequestRule> = new Map<string, RequestRule>([
  [NamedOperations.updateVettedPackages, updateVettedPackagesRule],
  [NamedOperations.getUpdateByOffset, getUpdateByOffsetRule],
  [NamedOperations.updateIdentityProviderConfig, updateIdentityProviderConfigRule],
  [NamedOperations.submitAndWaitForTransaction, submitAndWaitForTransactionRule],
]);
