// Counting a body's tree on its text before it is built (src/body/tree-size.ts).
import { describe, expect, it } from 'vitest';
import { treeTooLarge } from '../../src/body/tree-size.js';

const loose = { containers: 1_000, values: 1_000, keysOfOneObject: 1_000 };

describe('treeTooLarge', () => {
  it('counts objects and arrays, the whole body together', () => {
    const body = `{"a":[${Array(10).fill('{}').join(',')}]}`; // 12 containers
    expect(treeTooLarge(body, { ...loose, containers: 12 })).toBeUndefined();
    expect(treeTooLarge(body, { ...loose, containers: 11 })).toBe('more than 11 objects and arrays');
  });

  it('counts keys, strings, numbers and literals as values, a number or literal once however long', () => {
    const body = '{"a":1.5e+10,"b":"x","c":[true,false,null,-12]}'; // an object, 3 keys, 6 scalars, an array
    expect(treeTooLarge(body, { ...loose, values: 11 })).toBeUndefined();
    expect(treeTooLarge(body, { ...loose, values: 10 })).toBe('more than 10 values');
  });

  it("counts each object's own keys, not the keys of the objects in it nor strings in its arrays", () => {
    const body = '{"a":{"x":1,"y":2},"b":["c","d","e"],"f" : 3}';
    expect(treeTooLarge(body, { ...loose, keysOfOneObject: 3 })).toBeUndefined();
    expect(treeTooLarge(body, { ...loose, keysOfOneObject: 2 })).toBe('an object of more than 2 keys');
  });

  it('reads strings whole: brackets, colons and escaped quotes inside them count for nothing', () => {
    const body = String.raw`{"a":"[{\"x\":1}]","b\\":"}{"}`;
    expect(treeTooLarge(body, { containers: 1, values: 5, keysOfOneObject: 2 })).toBeUndefined();
  });
});
