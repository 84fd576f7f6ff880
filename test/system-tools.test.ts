// The marker a test group's name carries for the programs it needs, which the missing-tools reporter
// reads back to name them in the run's last line.
import { describe, expect, it } from 'vitest';
import { needsMarker, neededTools } from './helpers/system-tools.js';

describe('the needs marker', () => {
  it('names one program or several, and reads back as written', () => {
    expect(needsMarker('kubectl')).toBe('[needs kubectl]');
    expect(needsMarker('helm', 'kubectl')).toBe('[needs helm, kubectl]');
    expect(neededTools(`renders the chart ${needsMarker('helm', 'kubectl')}`)).toEqual(['helm', 'kubectl']);
    expect(neededTools(`scrapes ${needsMarker('redis-server')}`)).toEqual(['redis-server']);
  });

  it('reads nothing from a name without one, or with one elsewhere than at its end', () => {
    expect(neededTools('renders the chart')).toEqual([]);
    expect(neededTools('[needs helm] renders the chart')).toEqual([]);
  });
});
