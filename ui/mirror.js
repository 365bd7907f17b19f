// The LED ring mirror: the robot's own LED contract (src/robot/led.ts, served compiled as led.js) repainted
// here every REPAINT_MS from the bridge's view of one device, so the security flash and the dance sweep
// animate locally exactly as the firmware would draw them.
import { agoText, clockTime, getJson, openEventStream } from '/ui/assets/common.js';
import { LED_COUNT, REPAINT_MS, renderRing } from '/ui/assets/led.js';

/** Fallback refresh when the event stream is down (SPEC: the mirror refreshes by 2 s polling). */
const POLL_MS = 2000;
/** Perception events that change what the ring shows: each one triggers an immediate refetch. */
const NUDGE_EVENTS = [
  'snapshot',
  'state_changed',
  'face_detected',
  'face_lost',
  'face_recognized',
  'chat_status',
];

const params = new URLSearchParams(location.search);
const wantedDevice = params.get('device') || '';
const ringEl = document.getElementById('ring');
const pixels = [];
/** Latest ring JSON and when (page clock) it arrived: ages in it count from that moment. */
let wire = null;
let receivedAtMs = 0;
let fetching = false;
let refetch = false;

function buildRing() {
  for (let i = 0; i < LED_COUNT; i++) {
    const pixel = document.createElement('div');
    pixel.className = 'pixel';
    pixel.dataset.pixel = String(i);
    pixel.title = `pixel ${i}`;
    // Pixels 0-5 up the left half from the bottom, 6-11 down the right half from the top: the two rings.
    const degrees = i < 6 ? 195 + i * 30 : 15 + (i - 6) * 30;
    pixel.style.transform = `rotate(${degrees}deg) translateY(-9rem) rotate(${-degrees}deg)`;
    const label = document.createElement('span');
    label.textContent = String(i);
    pixel.append(label);
    ringEl.append(pixel);
    pixels.push(pixel);
  }
}

/** The wire's ages turned into renderRing's times on the page's own clock. */
function ringInput(nowMs) {
  const at = (ageMs) => (typeof ageMs === 'number' ? receivedAtMs - ageMs : undefined);
  const input = {
    state: wire.state,
    stateSince: at(wire.state_age_ms) ?? nowMs,
    toggles: wire.toggles,
    facePresent: wire.face_present,
    listening: wire.listening,
    now: nowMs,
  };
  const faceLostAt = at(wire.face_lost_age_ms);
  if (faceLostAt !== undefined) input.faceLostAt = faceLostAt;
  const identifiedAt = at(wire.identified_age_ms);
  if (identifiedAt !== undefined) input.faceIdentifiedAt = identifiedAt;
  const danceStartedAt = at(wire.dance_age_ms);
  if (danceStartedAt !== undefined) input.danceStartedAt = danceStartedAt;
  return input;
}

function repaint() {
  if (!wire) return;
  const ring = renderRing(ringInput(Date.now()));
  ring.forEach(([r, g, b], i) => {
    const colour = `rgb(${r}, ${g}, ${b})`;
    if (pixels[i].style.backgroundColor !== colour) pixels[i].style.backgroundColor = colour;
  });
}

function showStatus() {
  const deviceText = wire.device_id ?? 'no device has reported yet';
  document.getElementById('device').textContent = wire.known ? deviceText : `${deviceText} (not seen yet)`;
  document.getElementById('state').textContent = wire.reported_state ?? `${wire.state} (not reported)`;
  const lastEvent =
    wire.updated_age_ms === null ? '' : ` (device's last event ${agoText(wire.updated_age_ms)})`;
  document.getElementById('updated').textContent = `${clockTime(Date.now())}${lastEvent}`;
  document.body.dataset.state = wire.state;
}

async function refresh() {
  if (fetching) {
    refetch = true;
    return;
  }
  fetching = true;
  const errorEl = document.getElementById('error');
  try {
    do {
      refetch = false;
      const query = wantedDevice ? `?device=${encodeURIComponent(wantedDevice)}` : '';
      wire = await getJson(`/ui/api/ring${query}`);
      receivedAtMs = Date.now();
      showStatus();
      repaint();
      errorEl.hidden = true;
    } while (refetch);
  } catch (error) {
    errorEl.textContent = `cannot reach the bridge: ${error.message}`;
    errorEl.hidden = false;
  } finally {
    fetching = false;
  }
}

function nudge(_name, data) {
  // Frames about other devices cannot change this ring (the snapshot frame has no device_id).
  if (wantedDevice && data && typeof data.device_id === 'string' && data.device_id !== wantedDevice) return;
  // Counted where tests (and curious people in devtools) can see that nudges, not the poll, drive updates.
  document.body.dataset.nudges = String(Number(document.body.dataset.nudges ?? 0) + 1);
  void refresh();
}

buildRing();
void refresh();
setInterval(repaint, REPAINT_MS);
setInterval(() => void refresh(), POLL_MS);
openEventStream(NUDGE_EVENTS, nudge, (live) => {
  document.getElementById('link').textContent = live ? 'live (event stream + 2 s poll)' : 'polling every 2 s';
});
