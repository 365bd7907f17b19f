// Helpers shared by the dashboard and the LED ring mirror. Plain ES modules, no build step.
// Everything shown is built with textContent, never innerHTML: device names and event data come from
// the LAN and must not become markup.

/** Creates an element; `props` keys starting with "on" become listeners, `dataset` and `class` are handled. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key in node) node[key] = value;
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** Replaces a container's children. */
export function fill(container, ...children) {
  container.replaceChildren();
  for (const child of children.flat()) {
    if (child !== undefined && child !== null && child !== false) container.append(child);
  }
}

/** Local wall-clock time of an epoch-ms instant, HH:MM:SS. */
export function clockTime(epochMs) {
  if (typeof epochMs !== 'number' || !Number.isFinite(epochMs)) return '—';
  return new Date(epochMs).toLocaleTimeString([], { hour12: false });
}

/** "3 s ago", "4 min ago" from an age in ms. */
export function agoText(ageMs) {
  if (typeof ageMs !== 'number' || !Number.isFinite(ageMs)) return '—';
  const sec = Math.max(0, Math.round(ageMs / 1000));
  if (sec < 60) return `${sec} s ago`;
  if (sec < 3600) return `${Math.round(sec / 60)} min ago`;
  return `${Math.round(sec / 3600)} h ago`;
}

/** A number of ms, or a dash for a stage the turn never reached. */
export function msText(value) {
  return typeof value === 'number' && Number.isFinite(value) ? `${Math.round(value)} ms` : '—';
}

/** An error thrown by getJson/postJson, carrying the DESIGN §2 code. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function readReply(response) {
  const text = await response.text();
  let body;
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = {};
  }
  if (!response.ok) {
    const error = body?.error ?? {};
    throw new ApiError(
      response.status,
      error.code ?? 'http_error',
      error.message ?? `HTTP ${response.status}`,
    );
  }
  return body;
}

export async function getJson(path) {
  return readReply(await fetch(path, { headers: { accept: 'application/json' }, cache: 'no-store' }));
}

export async function postJson(path, body, csrfToken) {
  const headers = { 'content-type': 'application/json', accept: 'application/json' };
  if (csrfToken) headers['x-csrf-token'] = csrfToken;
  return readReply(
    await fetch(path, {
      method: 'POST',
      headers,
      body: JSON.stringify(body ?? {}),
      credentials: 'same-origin',
    }),
  );
}

/** The bridge's perception event stream (SSE): `onEvent(name, data)` for each named frame. */
export function openEventStream(names, onEvent, onStatus) {
  const source = new EventSource('/api/perception/stream');
  for (const name of names) {
    source.addEventListener(name, (message) => {
      let data = null;
      try {
        data = JSON.parse(message.data);
      } catch {
        // a frame we cannot read still counts as a nudge
      }
      onEvent(name, data);
    });
  }
  source.addEventListener('open', () => onStatus?.(true));
  source.addEventListener('error', () => onStatus?.(false));
  return source;
}
