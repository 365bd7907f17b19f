// Promise plumbing shared by the ACP client's modules: waits that an AbortSignal can end, and races against a
// signal or a clock. Every helper detaches its listener or timer once settled, so long-lived signals and
// connections do not accumulate them turn after turn.

/** The settling side of a parked wait, held by whoever will grant it (the ready list, a conversation's queue). */
export interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

/** Parks a waiter with `park` until someone settles it. If `signal` aborts first, `unpark` removes it, so an
 *  abandoned waiter is never granted later, and the wait rejects with the signal's reason. */
export function abortableWait<T>(
  signal: AbortSignal,
  park: (waiter: Waiter<T>) => void,
  unpark: (waiter: Waiter<T>) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      unpark(waiter);
      reject(signal.reason);
    };
    const waiter: Waiter<T> = {
      resolve: (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      reject: (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    };
    park(waiter);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Settles like `promise` unless `interrupt` settles first; `interrupt` arms its trigger and returns how to
 *  disarm it once `promise` has settled. */
function raceAgainst<T>(
  promise: Promise<T>,
  interrupt: (resolve: (value: T) => void, reject: (error: unknown) => void) => () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const disarm = interrupt(resolve, reject);
    promise.then(
      (value) => {
        disarm();
        resolve(value);
      },
      (error) => {
        disarm();
        reject(error);
      },
    );
  });
}

/** Rejects with the signal's reason as soon as it aborts; the underlying call is left to finish on its own. */
export function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return raceAgainst(promise, (_resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    return () => signal.removeEventListener('abort', onAbort);
  });
}

/** Rejects with `onTimeout()` when `promise` has not settled within `ms`. */
export function withDeadline<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return raceAgainst(promise, (_resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    return () => clearTimeout(timer);
  });
}

/** Never rejects: `fallback` stands for both a late answer and a failed one. */
export function withTimeout<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  return raceAgainst(
    promise.then(
      (value) => value,
      () => fallback,
    ),
    (resolve) => {
      const timer = setTimeout(() => resolve(fallback), ms);
      return () => clearTimeout(timer);
    },
  );
}
