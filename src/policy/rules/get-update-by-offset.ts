// POST /v2/updates/update-by-offset (Canton
// `UpdateServiceRequestValidator.validateUpdateByOffset`: the offset, then update_format, then the
// format itself). The offset is judged on its exact digits: 9223372036854775807 is valid, 2^63 is not.
import { INT64_MAX, INT64_MIN, readInteger } from '../numbers.js';
import {
  decodeFailure,
  field,
  isAbsent,
  isObject,
  missingField,
  nonPositiveOffset,
  requestRule,
  wrongType,
  type Violation,
} from '../violation.js';
import { decodeUpdateFormat, validateUpdateFormat } from './formats.js';

export const getUpdateByOffsetRule = requestRule(['offset'], (body, context): Violation | undefined => {
  if (!isObject(body)) return wrongType('', 'an object', body);

  // What the JSON decoder refuses (relaxed decoding: an absent offset is 0, absent formats None).
  const rawOffset = field(body, 'offset');
  let offset = 0n;
  if (rawOffset !== undefined) {
    const reading = readInteger(rawOffset, context.numberText('offset'), INT64_MIN, INT64_MAX);
    if (!reading.ok) return decodeFailure(`${reading.reason}; the offset must be an integer (int64)`, 'offset');
    offset = reading.value;
  }
  const updateFormat = field(body, 'updateFormat');
  if (!isAbsent(updateFormat)) {
    const problem = decodeUpdateFormat(updateFormat, 'updateFormat');
    if (problem !== undefined) return problem;
  }

  // Canton's validation, in its order.
  if (offset <= 0n) return nonPositiveOffset('offset', offset.toString());
  if (!isObject(updateFormat)) return missingField('update_format');
  return validateUpdateFormat(updateFormat);
});
