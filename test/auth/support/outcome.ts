// What an authentication attempt came to: 'accepted', or the refusal's reason.
import { AuthFailure } from '../../../src/auth/failure.js';

export async function reasonOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'accepted';
  } catch (error) {
    if (error instanceof AuthFailure) return error.reason;
    throw error;
  }
}
