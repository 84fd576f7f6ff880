// The UTC periods quotas, budgets and usage are counted in (a day from 00:00 UTC, a calendar month).

/** The UTC day and month a moment falls in: their names, and their bounds in epoch milliseconds. */
export function periodsAt(at: number) {
  const date = new Date(at);
  const year = date.getUTCFullYear();
  const month = date.getUTCMonth();
  const dayStart = Date.UTC(year, month, date.getUTCDate());
  const monthStart = Date.UTC(year, month, 1);
  const monthEnd = Date.UTC(year, month + 1, 1);
  return {
    day: { id: new Date(dayStart).toISOString().slice(0, 10), start: dayStart, end: dayStart + 86_400_000 },
    month: { id: new Date(monthStart).toISOString().slice(0, 7), start: monthStart, end: monthEnd },
  };
}
