// The route list fastify itself registers, for the bad-input route tables: test files mock the shared app
// factory with `withRouteRecorder`, so server code stays as it is and a route added anywhere shows up.
import type * as HttpApp from '../../src/util/http-app.js';

/** The mocked module: createHttpApp with an onRoute hook that adds "METHOD /url" to `routes`. */
export function withRouteRecorder(real: typeof HttpApp, routes: Set<string>): typeof HttpApp {
  return {
    ...real,
    createHttpApp: (options) => {
      const app = real.createHttpApp(options);
      app.addHook('onRoute', (route) => {
        for (const method of [route.method].flat())
          if (method !== 'HEAD') routes.add(`${method} ${route.url}`);
      });
      return app;
    },
  };
}
