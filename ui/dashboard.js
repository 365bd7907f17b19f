// The LAN dashboard: one overview JSON (GET /ui/api/overview) drawn into tables, refreshed by the
// perception event stream and a slow poll. Controls only work after a password login; the CSRF token
// lives in this page's memory (GET /ui/api/session hands it back after a reload), never in storage.
import {
  agoText,
  clockTime,
  el,
  fill,
  getJson,
  msText,
  openEventStream,
  postJson,
} from '/ui/assets/common.js';

const POLL_MS = 5000;
/** Several events in a burst cause one refetch. */
const NUDGE_DEBOUNCE_MS = 500;

const $ = (id) => document.getElementById(id);
const auth = { readOnly: true, loggedIn: false, csrf: '' };
let overview = null;
let nudgeTimer = null;

function controlsEnabled() {
  return !auth.readOnly && auth.loggedIn;
}

function renderAuth() {
  const box = $('auth');
  if (auth.readOnly) {
    fill(box, el('span', { class: 'note' }, 'read-only'));
    $('controls-note').textContent =
      'The dashboard is read-only. To enable these controls, set UI_PASSWORD (config ui.password) and restart the bridge.';
  } else if (!auth.loggedIn) {
    const input = el('input', {
      id: 'password',
      type: 'password',
      placeholder: 'password',
      autocomplete: 'current-password',
    });
    const form = el(
      'form',
      { id: 'login', onsubmit: (event) => void login(event, input) },
      input,
      el('button', { type: 'submit', id: 'login-button' }, 'Log in'),
    );
    fill(box, form);
    $('controls-note').textContent = 'Log in (top right) to change kid mode, smart mode or the robot state.';
  } else {
    fill(
      box,
      el('span', { class: 'ok' }, 'logged in'),
      el('button', { type: 'button', id: 'logout', onclick: () => void logout() }, 'Log out'),
    );
    $('controls-note').textContent = '';
  }
  renderControls();
}

async function login(event, input) {
  event.preventDefault();
  try {
    const reply = await postJson('/ui/login', { password: input.value });
    Object.assign(auth, { loggedIn: true, csrf: reply.csrf_token });
    $('control-result').textContent = '';
  } catch (error) {
    $('control-result').textContent = `login failed: ${error.message}`;
  }
  renderAuth();
}

async function logout() {
  await postJson('/ui/logout', {}).catch(() => undefined);
  Object.assign(auth, { loggedIn: false, csrf: '' });
  renderAuth();
}

function renderControls() {
  const enabled = controlsEnabled() && overview !== null;
  const toggles = overview?.toggles ?? {};
  const onOff = (value) => (value === undefined ? '—' : value ? 'on' : 'off');
  $('kid-state').textContent = onOff(toggles.kid_mode);
  $('smart-state').textContent = onOff(toggles.smart_mode);
  $('kid-toggle').textContent = toggles.kid_mode ? 'Turn kid mode off' : 'Turn kid mode on';
  $('smart-toggle').textContent = toggles.smart_mode ? 'Turn smart mode off' : 'Turn smart mode on';
  for (const id of ['kid-toggle', 'smart-toggle', 'state-select', 'state-device', 'state-set'])
    $(id).disabled = !enabled;
  const select = $('state-device');
  const ids = new Set([
    ...(overview?.devices ?? []).map((d) => d.device_id),
    ...(overview?.voice?.devices ?? []).map((d) => d.device_id),
  ]);
  const current = select.value;
  fill(
    select,
    el('option', { value: '' }, '(the only / first device)'),
    [...ids].map((id) => el('option', { value: id }, id)),
  );
  select.value = ids.has(current) ? current : '';
}

async function mutate(path, body, what) {
  const result = $('control-result');
  result.textContent = `${what}…`;
  try {
    const reply = await postJson(path, body, auth.csrf);
    const pushNote = reply.pushed === false ? ` (saved; not pushed to the robot: ${reply.push_error})` : '';
    result.textContent = `${what}: done${pushNote}`;
  } catch (error) {
    result.textContent = `${what} failed: ${error.code}: ${error.message}`;
    if (error.code === 'login_required' || error.code === 'csrf_failed')
      Object.assign(auth, { loggedIn: false, csrf: '' });
  }
  renderAuth();
  await refresh();
}

function deviceBody(extra) {
  const device = $('state-device').value;
  return device ? { ...extra, device_id: device } : extra;
}

$('kid-toggle').addEventListener(
  'click',
  () => void mutate('/ui/api/kid-mode', { enabled: !overview?.toggles?.kid_mode }, 'kid mode'),
);
$('smart-toggle').addEventListener(
  'click',
  () =>
    void mutate('/ui/api/smart-mode', deviceBody({ enabled: !overview?.toggles?.smart_mode }), 'smart mode'),
);
$('state-set').addEventListener(
  'click',
  () => void mutate('/ui/api/state', deviceBody({ state: $('state-select').value }), 'robot state'),
);

function table(headings, rows, empty) {
  if (rows.length === 0) return el('p', { class: 'note' }, empty);
  return el(
    'table',
    {},
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        headings.map((h) => el('th', {}, h)),
      ),
    ),
    el(
      'tbody',
      {},
      rows.map((cells) => el('tr', {}, cells)),
    ),
  );
}

const cell = (text, cls) => el('td', cls ? { class: cls } : {}, text);

function renderDevices(data) {
  const now = data.server_now_ms;
  const voice = data.voice;
  const connected = new Map(voice.devices.map((d) => [d.device_id, d]));
  $('voice').className = voice.ok ? 'note' : 'note error';
  $('voice').textContent = voice.ok
    ? `voice server: ${voice.devices.length} device(s) connected`
    : `${voice.error} (the table shows what the bridge last heard)`;
  const ids = [...new Set([...data.devices.map((d) => d.device_id), ...connected.keys()])];
  const byId = new Map(data.devices.map((d) => [d.device_id, d]));
  const pips = [
    data.toggles.kid_mode && el('span', {}, el('span', { class: 'pip kid' }), 'kid '),
    data.toggles.smart_mode && el('span', {}, el('span', { class: 'pip smart' }), 'smart'),
  ];
  const rows = ids.map((id) => {
    const d = byId.get(id);
    const link = el('a', { href: `/ui/led-ring-mirror?device=${encodeURIComponent(id)}` }, 'ring');
    return [
      el('td', { class: 'mono', dataset: { device: id } }, id),
      cell(connected.has(id) ? 'yes' : voice.ok ? 'no' : '?'),
      cell(d?.state ?? connected.get(id)?.robot_state ?? '—'),
      cell(d?.state_since ? agoText(now - d.state_since) : '—'),
      el('td', {}, pips.some(Boolean) ? pips : 'none'),
      cell(d ? (d.face.present ? 'present' : 'none') : '—'),
      cell(d?.identified ? `${d.identified.name} (${agoText(now - d.identified.at)})` : '—'),
      cell(d?.chat_status?.status ?? '—'),
      cell(d?.last_event ? `${d.last_event.name}, ${agoText(now - d.last_event.at)}` : '—'),
      el('td', {}, link),
    ];
  });
  fill(
    $('devices'),
    table(
      [
        'device',
        'connected',
        'state',
        'since',
        'toggles',
        'face',
        'identified',
        'chat',
        'last event',
        'mirror',
      ],
      rows,
      'No device has connected or reported yet.',
    ),
  );
}

function renderTurns(turns) {
  fill(
    $('turns'),
    table(
      ['time', 'device', 'kind', 'text', 'stt', 'first token', 'first audio', 'total'],
      turns.map((t) => [
        cell(clockTime(t.ts * 1000)),
        el('td', { class: 'mono' }, t.device_id),
        cell(t.aborted ? `${t.kind} (aborted)` : t.kind),
        cell(t.text || '—'),
        cell(msText(t.stt_ms), 'num'),
        cell(msText(t.first_token_ms), 'num'),
        cell(msText(t.first_audio_ms), 'num'),
        cell(msText(t.total_ms), 'num'),
      ]),
      'No turns yet.',
    ),
  );
}

function renderEvents(events) {
  fill(
    $('events'),
    table(
      ['time', 'device', 'event', 'data'],
      events.map((e) => [
        cell(clockTime(e.received_at_ms)),
        el('td', { class: 'mono' }, e.device_id),
        cell(e.name),
        el('td', { class: 'mono' }, Object.keys(e.data).length ? JSON.stringify(e.data) : ''),
      ]),
      'No perception events yet.',
    ),
  );
}

function renderCalendar(calendar) {
  if (!calendar.ok)
    return fill($('calendar'), el('p', { class: 'error' }, `calendar unavailable: ${calendar.error}`));
  const { today } = calendar;
  const failed = today.feeds
    .filter((f) => !f.ok)
    .map((f) => el('p', { class: 'error' }, `feed ${f.person}: ${f.error ?? 'failed'}`));
  const when = (e) => (e.all_day ? 'all day' : `${e.start.slice(11, 16)}–${e.end.slice(11, 16)}`);
  fill(
    $('calendar'),
    today.date ? el('p', { class: 'note' }, `${today.date} ${today.time_zone}`) : null,
    failed,
    table(
      ['when', 'who', 'what', 'where'],
      today.events.map((e) => [cell(when(e)), cell(e.person), cell(e.title), cell(e.location ?? '')]),
      'Nothing on the calendar today.',
    ),
  );
}

async function refresh() {
  try {
    overview = await getJson('/ui/api/overview');
    if (auth.loggedIn && !overview.logged_in) Object.assign(auth, { loggedIn: false, csrf: '' });
    renderDevices(overview);
    renderTurns(overview.turns);
    renderEvents(overview.events);
    renderCalendar(overview.calendar);
    renderAuth();
  } catch (error) {
    $('voice').className = 'note error';
    $('voice').textContent = `cannot reach the bridge: ${error.message}`;
  }
}

function nudge() {
  if (nudgeTimer !== null) return;
  nudgeTimer = setTimeout(() => {
    nudgeTimer = null;
    void refresh();
  }, NUDGE_DEBOUNCE_MS);
}

async function start() {
  try {
    const session = await getJson('/ui/api/session');
    Object.assign(auth, {
      readOnly: session.read_only,
      loggedIn: session.logged_in,
      csrf: session.csrf_token ?? '',
    });
  } catch {
    // the overview below reports the bridge as unreachable
  }
  renderAuth();
  await refresh();
  setInterval(() => void refresh(), POLL_MS);
  // The bridge names its stream's events (an EventSource listens by name); without an overview, turns only.
  openEventStream(overview?.stream_events ?? ['snapshot', 'turn'], nudge, (live) => {
    $('live').textContent = live ? 'live' : 'reconnecting…';
    $('live').className = live ? 'live on' : 'live';
  });
}

void start();
