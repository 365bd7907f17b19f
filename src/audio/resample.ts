// Sample-rate conversion of mono PCM16 with a windowed-sinc kernel (Blackman window, 16 zero crossings
// each side), low-passed at the lower of the two Nyquist rates so downsampling does not alias.
// Whole-chunk: each TTS segment or asset is converted in one call.

const HALF_TAPS = 16;

export function resample(input: Int16Array, fromRate: number, toRate: number): Int16Array {
  if (fromRate === toRate || input.length === 0) return input;
  const ratio = fromRate / toRate;
  const cutoff = Math.min(1, toRate / fromRate);
  const outLength = Math.floor(input.length / ratio);
  const out = new Int16Array(outLength);
  const span = Math.ceil(HALF_TAPS / cutoff);
  for (let i = 0; i < outLength; i++) {
    const t = i * ratio;
    const center = Math.floor(t);
    let sum = 0;
    let norm = 0;
    for (let k = center - span + 1; k <= center + span; k++) {
      const x = (t - k) * cutoff;
      const w = kernel(x);
      if (w === 0) continue;
      norm += w;
      if (k >= 0 && k < input.length) sum += input[k]! * w;
    }
    const value = norm > 0 ? sum / norm : 0;
    out[i] = value > 32767 ? 32767 : value < -32768 ? -32768 : Math.round(value);
  }
  return out;
}

function kernel(x: number): number {
  const ax = Math.abs(x);
  if (ax >= HALF_TAPS) return 0;
  if (ax < 1e-9) return 1;
  const px = Math.PI * x;
  const window =
    0.42 + 0.5 * Math.cos((Math.PI * x) / HALF_TAPS) + 0.08 * Math.cos((2 * Math.PI * x) / HALF_TAPS);
  return (Math.sin(px) / px) * window;
}
