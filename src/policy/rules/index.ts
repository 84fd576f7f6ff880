// The request rules by operation name: only these routes have their bodies read.
import { NamedOperations, SubmissionOperations } from '../../operations.js';
import type { RequestRule } from '../violation.js';
import { getUpdateByOffsetRule } from './get-update-by-offset.js';
import { submitAndWaitForTransactionRule } from './submit-and-wait-for-transaction.js';
import { submittingUserRule } from './submitting-user.js';
import { updateIdentityProviderConfigRule } from './update-identity-provider-config.js';
import { updateVettedPackagesRule } from './update-vetted-packages.js';

export const REQUEST_RULES: ReadonlyMap<string, RequestRule> = new Map<string, RequestRule>([
  [NamedOperations.updateVettedPackages, updateVettedPackagesRule],
  [NamedOperations.getUpdateByOffset, getUpdateByOffsetRule],
  [NamedOperations.updateIdentityProviderConfig, updateIdentityProviderConfigRule],
  [NamedOperations.submitAndWaitForTransaction, submitAndWaitForTransactionRule],
  // The other submissions: only their userId (JsCommands and the prepare/execute requests hold it at
  // the top level, reassignments in reassignmentCommands).
  [SubmissionOperations.submitAndWait, submittingUserRule()],
  [SubmissionOperations.submitAndWaitForTransactionTree, submittingUserRule()],
  [SubmissionOperations.asyncSubmit, submittingUserRule()],
  [SubmissionOperations.submitAndWaitForReassignment, submittingUserRule('reassignmentCommands')],
  [SubmissionOperations.asyncSubmitReassignment, submittingUserRule('reassignmentCommands')],
  [SubmissionOperations.prepare, submittingUserRule()],
  [SubmissionOperations.execute, submittingUserRule()],
  [SubmissionOperations.executeAndWait, submittingUserRule()],
  [SubmissionOperations.executeAndWaitForTransaction, submittingUserRule()],
]);
