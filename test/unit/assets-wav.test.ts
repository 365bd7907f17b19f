// WAV reading/writing (src/audio/wav.ts) and the audio asset library (src/audio/assets.ts) on a temporary
// folder: safe names only, case-insensitive lookup, decoding to mono PCM16 at the rate asked for.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetError, AssetLibrary } from '../../src/audio/assets.js';
import { loadResampler } from '../../src/audio/resample.js';
import { decodeWav, encodeWav } from '../../src/audio/wav.js';

/** A sine tone as PCM16. */
function tone(samples: number, rate: number, hz = 440, amplitude = 8000): Int16Array {
  const pcm = new Int16Array(samples);
  for (let i = 0; i < samples; i++) pcm[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate));
  return pcm;
}

const rms = (pcm: Int16Array) => Math.sqrt(pcm.reduce((sum, v) => sum + v * v, 0) / Math.max(1, pcm.length));

/** A PCM WAV built by hand, field by field, for layouts encodeWav does not write. */
function handWav(options: {
  channels: number;
  rate: number;
  frames: number[][]; // one array of channel samples per frame
  bits?: number;
  format?: number;
  dataSize?: number; // what the header claims
  riffSize?: number;
  extraChunk?: { id: string; body: Buffer };
}): Buffer {
  const { channels, rate, frames } = options;
  const bits = options.bits ?? 16;
  const data = Buffer.alloc(frames.length * channels * 2);
  frames.forEach((frame, i) => {
    frame.forEach((v, c) => {
      data.writeInt16LE(v, (i * channels + c) * 2);
    });
  });
  const fmt = Buffer.alloc(24);
  fmt.write('fmt ', 0);
  fmt.writeUInt32LE(16, 4);
  fmt.writeUInt16LE(options.format ?? 1, 8);
  fmt.writeUInt16LE(channels, 10);
  fmt.writeUInt32LE(rate, 12);
  fmt.writeUInt32LE((rate * channels * bits) / 8, 16);
  fmt.writeUInt16LE((channels * bits) / 8, 20);
  fmt.writeUInt16LE(bits, 22);
  const parts: Buffer[] = [fmt];
  if (options.extraChunk) {
    const { id, body } = options.extraChunk;
    const header = Buffer.alloc(8);
    header.write(id, 0);
    header.writeUInt32LE(body.length, 4);
    parts.push(header, body, Buffer.alloc(body.length & 1)); // chunks are padded to even length
  }
  const dataHeader = Buffer.alloc(8);
  dataHeader.write('data', 0);
  dataHeader.writeUInt32LE(options.dataSize ?? data.length, 4);
  parts.push(dataHeader, data);
  const body = Buffer.concat(parts);
  const riff = Buffer.alloc(12);
  riff.write('RIFF', 0);
  riff.writeUInt32LE(options.riffSize ?? 4 + body.length, 4);
  riff.write('WAVE', 8);
  return Buffer.concat([riff, body]);
}

/** Whether sox on this machine can write Ogg Vorbis (`sox in.wav out.ogg`); checked once, up front. */
const hasSoxOgg = (() => {
  const probe = mkdtempSync(join(tmpdir(), 'deskbot-sox-'));
  try {
    writeFileSync(join(probe, 'in.wav'), encodeWav(new Int16Array(1600), 16_000));
    return spawnSync('sox', [join(probe, 'in.wav'), join(probe, 'out.ogg')]).status === 0;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
})();

describe('encodeWav', () => {
  it('writes the canonical 44-byte PCM16 mono header', () => {
    const wav = encodeWav(Int16Array.from([1, -1, 32767]), 16_000);
    expect(wav.length).toBe(44 + 6);
    expect(wav.toString('ascii', 0, 4)).toBe('RIFF');
    expect(wav.readUInt32LE(4)).toBe(36 + 6);
    expect(wav.toString('ascii', 8, 16)).toBe('WAVEfmt ');
    expect(wav.readUInt32LE(16)).toBe(16);
    expect(wav.readUInt16LE(20)).toBe(1); // PCM
    expect(wav.readUInt16LE(22)).toBe(1); // mono
    expect(wav.readUInt32LE(24)).toBe(16_000);
    expect(wav.readUInt32LE(28)).toBe(32_000); // byte rate
    expect(wav.readUInt16LE(32)).toBe(2); // block align
    expect(wav.readUInt16LE(34)).toBe(16);
    expect(wav.toString('ascii', 36, 40)).toBe('data');
    expect(wav.readUInt32LE(40)).toBe(6);
    expect([wav.readInt16LE(44), wav.readInt16LE(46), wav.readInt16LE(48)]).toEqual([1, -1, 32767]);
  });

  it('encodes a subarray view, not the whole underlying buffer', () => {
    const backing = Int16Array.from([9, 9, 1, 2, 3, 9]);
    const wav = encodeWav(backing.subarray(2, 5), 24_000);
    expect(decodeWav(wav).pcm).toEqual(Int16Array.from([1, 2, 3]));
  });
});

describe('decodeWav', () => {
  it('round-trips mono PCM at any rate (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -32768, max: 32767 }), { maxLength: 2000 }),
        fc.constantFrom(8_000, 16_000, 22_050, 24_000, 48_000),
        (samples, rate) => {
          const pcm = Int16Array.from(samples);
          const decoded = decodeWav(encodeWav(pcm, rate));
          expect(decoded.sampleRate).toBe(rate);
          expect(decoded.channels).toBe(1);
          expect(decoded.pcm).toEqual(pcm);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('decodes from a Uint8Array view at an offset', () => {
    const wav = encodeWav(Int16Array.from([5, -5]), 16_000);
    const padded = new Uint8Array(wav.length + 3);
    padded.set(wav, 3);
    expect(decodeWav(padded.subarray(3)).pcm).toEqual(Int16Array.from([5, -5]));
  });

  it('averages a hand-built stereo WAV down to mono', () => {
    const wav = handWav({
      channels: 2,
      rate: 44_100,
      frames: [
        [100, 300],
        [-100, 100],
        [32767, 32767],
        [-32768, -32768],
        [1000, -3000],
        [1, 2], // 1.5 rounds to 2
      ],
    });
    const decoded = decodeWav(wav);
    expect(decoded.channels).toBe(2);
    expect(decoded.sampleRate).toBe(44_100);
    expect(decoded.pcm).toEqual(Int16Array.from([200, 0, 32767, -32768, -1000, 2]));
  });

  it('skips unknown chunks (odd-sized, padded) before the data', () => {
    const wav = handWav({
      channels: 1,
      rate: 16_000,
      frames: [[7], [8], [9]],
      extraChunk: { id: 'LIST', body: Buffer.from('INFOx') }, // 5 bytes + 1 pad byte
    });
    expect(decodeWav(wav).pcm).toEqual(Int16Array.from([7, 8, 9]));
  });

  it.each([
    ['0xFFFFFFFF (streamed)', 0xffffffff],
    ['0x7FFFF000 (what espeak-ng --stdout writes)', 0x7ffff000],
    ['0 (unknown)', 0],
  ])('a data size of %s is read to the end of the file', (_name, dataSize) => {
    const samples = Array.from(tone(1000, 22_050));
    const wav = handWav({
      channels: 1,
      rate: 22_050,
      frames: samples.map((v) => [v]),
      dataSize,
      riffSize: 0xffffffff,
    });
    const decoded = decodeWav(wav);
    expect(decoded.sampleRate).toBe(22_050);
    expect(decoded.pcm).toEqual(Int16Array.from(samples));
  });

  it('a streamed file cut mid-sample keeps the whole samples', () => {
    const wav = handWav({ channels: 1, rate: 16_000, frames: [[1], [2], [3]], dataSize: 0xffffffff });
    expect(decodeWav(wav.subarray(0, wav.length - 1)).pcm).toEqual(Int16Array.from([1, 2]));
  });

  it.skipIf(spawnSync('espeak-ng', ['--version']).status !== 0)(
    'decodes real espeak-ng --stdout output',
    () => {
      const wav = execFileSync('espeak-ng', ['--stdout', 'hello there']);
      const decoded = decodeWav(wav);
      expect(decoded.channels).toBe(1);
      expect(decoded.sampleRate).toBe(22_050);
      expect(decoded.pcm.length).toBe(Math.floor((wav.length - 44) / 2));
      expect(rms(decoded.pcm)).toBeGreaterThan(100);
    },
  );

  it.each([
    ['not RIFF', Buffer.from('JUNKxxxxWAVEfmt '), /RIFF/],
    ['too short', Buffer.from('RIFF'), /RIFF/],
    ['float format', handWav({ channels: 1, rate: 16_000, frames: [[0]], format: 3 }), /PCM/],
    ['8-bit', handWav({ channels: 1, rate: 16_000, frames: [[0]], bits: 8 }), /16-bit/],
    ['no data chunk', encodeWav(new Int16Array(4), 16_000).subarray(0, 36), /no data/],
  ])('%s → throws', (_name, file, message) => {
    expect(() => decodeWav(file)).toThrow(message);
  });
});

describe('AssetLibrary', () => {
  let dir: string;
  let library: AssetLibrary;

  beforeAll(async () => {
    await loadResampler();
    dir = mkdtempSync(join(tmpdir(), 'deskbot-assets-'));
    library = new AssetLibrary(dir);
    const wav16k = encodeWav(tone(16_000, 16_000), 16_000); // 1 s at 16 kHz
    writeFileSync(join(dir, 'b-song.wav'), wav16k);
    writeFileSync(join(dir, 'A Song.mp3'), Buffer.from('ID3 not really an mp3 '.repeat(50)));
    writeFileSync(join(dir, 'purr.WAV'), encodeWav(tone(1_600, 16_000, 200), 16_000));
    writeFileSync(
      join(dir, 'stereo.wav'),
      handWav({ channels: 2, rate: 24_000, frames: Array.from({ length: 2400 }, () => [1000, 3000]) }),
    );
    writeFileSync(join(dir, 'garbage.ogg'), Buffer.from('OggS this is not an ogg stream '.repeat(10)));
    writeFileSync(join(dir, 'garbage.wav'), Buffer.from('RIFF garbage'));
    writeFileSync(join(dir, 'clip.opus'), Buffer.from('not opus'));
    writeFileSync(join(dir, 'notes.txt'), 'not audio');
    writeFileSync(join(dir, 'song.flac'), 'not a listed type');
    writeFileSync(join(dir, '.hidden.wav'), wav16k);
    writeFileSync(join(dir, 'bad$name.wav'), wav16k);
    writeFileSync(join(dir, '-dash-first.wav'), wav16k);
    mkdirSync(join(dir, 'folder.wav'));
    // A real Ogg Vorbis file, when sox can make one here.
    if (hasSoxOgg) execFileSync('sox', [join(dir, 'b-song.wav'), join(dir, 'vorbis-tone.ogg')]);
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('list() returns only .wav/.mp3/.ogg/.opus files with safe names, sorted', async () => {
    const listed = await library.list();
    const expected = [
      'A Song.mp3',
      'b-song.wav',
      'clip.opus',
      'garbage.ogg',
      'garbage.wav',
      'purr.WAV',
      'stereo.wav',
      ...(hasSoxOgg ? ['vorbis-tone.ogg'] : []),
    ].sort();
    expect(listed.map((a) => a.file)).toEqual(expected);
    const bSong = listed.find((a) => a.file === 'b-song.wav')!;
    expect(bSong).toEqual({ name: 'b-song', file: 'b-song.wav', bytes: 44 + 32_000 });
    expect(listed.find((a) => a.file === 'purr.WAV')!.name).toBe('purr');
  });

  it('list() of a missing folder is empty', async () => {
    expect(await new AssetLibrary(join(dir, 'does-not-exist')).list()).toEqual([]);
  });

  it.each([
    ['b-song', 'b-song.wav'],
    ['b-song.wav', 'b-song.wav'],
    ['B-SONG', 'b-song.wav'],
    ['B-Song.WAV', 'b-song.wav'],
    ['a song', 'A Song.mp3'],
    ['A SONG.MP3', 'A Song.mp3'],
    ['purr', 'purr.WAV'],
    ['purr.wav', 'purr.WAV'],
  ])('find(%j) → %s', async (name, file) => {
    expect((await library.find(name)).file).toBe(file);
  });

  it.each([
    ['../x'],
    ['a/b'],
    ['..'],
    ['.'],
    [''],
    ['a\0b'],
    ['b-song.wav\0'],
    ['/etc/passwd'],
    ['..\\x'],
    ['a\\b'],
    ['../b-song'],
    ['b-song/..'],
    ['x..y'],
    ['.hidden'],
    ['x'.repeat(200)],
  ])('find(%j) → AssetError unsafe_name', async (name) => {
    const error = await library.find(name).catch((e) => e);
    expect(error).toBeInstanceOf(AssetError);
    expect(error.code).toBe('unsafe_name');
  });

  it.each([['nothing'], ['notes'], ['notes.txt'], ['song'], ['song.flac'], ['folder'], ['b-song.mp3']])(
    'find(%j) → AssetError not_found',
    async (name) => {
      const error = await library.find(name).catch((e) => e);
      expect(error).toBeInstanceOf(AssetError);
      expect(error.code).toBe('not_found');
    },
  );

  it('decode() of a 16 kHz WAV to 24 kHz gives 1.5× the samples and keeps the tone', async () => {
    const asset = await library.find('b-song');
    const pcm = await library.decode(asset, 24_000);
    expect(pcm).toBeInstanceOf(Int16Array);
    expect(pcm.length).toBe(24_000);
    expect(rms(pcm)).toBeGreaterThan(8000 * 0.7 * 0.9);
    expect(rms(pcm)).toBeLessThan(8000 * 0.7 * 1.1);
  });

  it.each([
    [16_000, 1_600],
    [24_000, 2_400],
    [48_000, 4_800],
    [8_000, 800],
  ])('decode() of 100 ms at 16 kHz to %i Hz → %i samples', async (rate, length) => {
    expect((await library.decode(await library.find('purr'), rate)).length).toBe(length);
  });

  it('decode() at the file rate returns the samples unchanged', async () => {
    const pcm = await library.decode(await library.find('b-song'), 16_000);
    expect(pcm).toEqual(tone(16_000, 16_000));
  });

  it('decode() of a stereo WAV gives mono', async () => {
    const pcm = await library.decode(await library.find('stereo'), 24_000);
    expect(pcm.length).toBe(2400);
    expect(pcm.every((v) => v === 2000)).toBe(true);
  });

  it.each([['A Song'], ['garbage.ogg'], ['garbage.wav'], ['clip']])(
    'decode() of corrupt %j → AssetError undecodable',
    async (name) => {
      const error = await library.decode(await library.find(name), 24_000).catch((e) => e);
      expect(error).toBeInstanceOf(AssetError);
      expect(error.code).toBe('undecodable');
      expect(error.message).toContain((await library.find(name)).file);
    },
  );

  // Skipped only where sox cannot write Ogg Vorbis.
  it.skipIf(!hasSoxOgg)(
    'decode() of an Ogg Vorbis file made by sox (1 s at 16 kHz) → about 24000 samples at 24 kHz',
    async () => {
      const asset = await library.find('vorbis-tone');
      const pcm = await library.decode(asset, 24_000);
      expect(Math.abs(pcm.length - 24_000)).toBeLessThan(240);
      expect(rms(pcm)).toBeGreaterThan(8000 * 0.7 * 0.8);
    },
  );
});
