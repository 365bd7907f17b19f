// GET /api/calendar/today[?person=name]: today's events, scrubbed like prompt text, with each feed's status.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { HttpError } from '../../util/http-error.js';
import type { Calendar } from './index.js';

const todayQuery = z.object({ person: z.string().trim().min(1).max(64).optional() });

export function registerCalendarRoutes(app: FastifyInstance, calendar: Calendar): void {
  app.get('/api/calendar/today', async (request) => {
    const query = todayQuery.safeParse(request.query ?? {});
    if (!query.success) {
      const issue = query.error.issues[0];
      const where = issue?.path.map(String).join('.') || 'query';
      throw new HttpError(400, 'invalid_query', `${where}: ${issue?.message ?? 'invalid'}`);
    }
    const { person } = query.data;
    if (person !== undefined && !calendar.persons().includes(person)) {
      throw new HttpError(404, 'unknown_person', `no calendar feed is configured for "${person}"`);
    }
    return calendar.today(person);
  });
}
