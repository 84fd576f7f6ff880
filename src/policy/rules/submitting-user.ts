// The submitting user, on every route that carries a submission's userId: Canton's authorizer
// requires it to be the token's user (RequiredClaim.MatchUserId in RequiredClaims.submissionClaims
// and executionClaims; ledger-api-core auth/services CommandServiceAuthorization,
// CommandSubmissionServiceAuthorization, InteractiveSubmissionServiceAuthorization). Absent or empty,
// the participant takes the token's user. Only that is judged on these routes: the rest of their
// bodies is the participant's to refuse.
import {
  field,
  isObject,
  permissionDenied,
  requestRule,
  type RequestRule,
  type RuleContext,
  type Violation,
} from '../violation.js';

/** A redacted PERMISSION_DENIED when `userId` (at `path`) names another user than the token's. */
export function otherUserViolation(userId: unknown, path: string, context: RuleContext): Violation | undefined {
  const user = context.principal?.subject;
  if (user === undefined || typeof userId !== 'string' || userId === '' || userId === user) return undefined;
  return permissionDenied(`${path} names another user than the token's subject`);
}

/** The rule for a body whose userId sits at its top level, or in the object under `holder`. */
export function submittingUserRule(holder?: string): RequestRule {
  const path = holder === undefined ? 'userId' : `${holder}.userId`;
  // No number on these routes is judged: none needs its exact digits. The userId sits at the top or in
  // an envelope: the body is tokenized as it arrives, never parsed whole (shallow).
  return requestRule(
    [],
    (body, context) => {
      const commands = holder !== undefined && isObject(body) ? field(body, holder) : body;
      return isObject(commands) ? otherUserViolation(field(commands, 'userId'), path, context) : undefined;
    },
    true,
  );
}
