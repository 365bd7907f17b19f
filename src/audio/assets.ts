// Audio assets (songs, purr sounds) under one folder: listed by name, decoded from WAV, MP3, Ogg Opus or
// Ogg Vorbis to mono PCM16 at the rate asked for. Names never leave the folder.
import { readdir, readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { fileInside } from '../util/data-dir.js';
import { resample } from './resample.js';
import { decodeWav } from './wav.js';

export const ASSET_EXTENSIONS = ['.wav', '.mp3', '.ogg', '.opus'] as const;
const SAFE_NAME = /^[\p{L}\p{N}][\p{L}\p{N} ._'-]{0,100}$/u;

/** A plain file name inside the folder: no separators, no `..`, no NUL, nothing absolute. */
export function isSafeAssetName(name: string): boolean {
  return SAFE_NAME.test(name) && !name.includes('..');
}

export interface AssetInfo {
  name: string;
  file: string;
  bytes: number;
}

export class AssetError extends Error {
  constructor(
    readonly code: 'unsafe_name' | 'not_found' | 'undecodable',
    message: string,
  ) {
    super(message);
  }
}

export class AssetLibrary {
  private lastDecoded: { key: string; pcm: Int16Array } | null = null;

  constructor(readonly dir: string) {}

  async list(): Promise<AssetInfo[]> {
    let entries: string[];
    try {
      entries = await readdir(this.dir);
    } catch {
      return [];
    }
    const assets: AssetInfo[] = [];
    for (const file of entries.sort()) {
      const ext = extname(file).toLowerCase();
      if (!(ASSET_EXTENSIONS as readonly string[]).includes(ext) || !SAFE_NAME.test(file)) continue;
      // A symlink out of the folder (songs/x.mp3 -> /etc/shadow) is not an asset: it is left out, so never played.
      const inside = await fileInside(this.dir, file);
      if (inside) assets.push({ name: file.slice(0, -ext.length), file, bytes: inside.bytes });
    }
    return assets;
  }

  /** Finds an asset by name (case-insensitive, with or without extension). */
  async find(name: string): Promise<AssetInfo> {
    if (!isSafeAssetName(name)) {
      throw new AssetError('unsafe_name', 'asset names are plain file names inside the songs folder');
    }
    const wanted = name.toLowerCase();
    const match = (await this.list()).find(
      (a) => a.name.toLowerCase() === wanted || a.file.toLowerCase() === wanted,
    );
    if (!match) throw new AssetError('not_found', `no asset named "${name}"`);
    return match;
  }

  /**
   * Decodes an asset to mono PCM16 at `rate`. The last result is kept: play-asset decodes once to refuse an
   * undecodable file before answering, and the conversation that then plays it gets the same PCM without a
   * second decode.
   */
  async decode(asset: AssetInfo, rate: number): Promise<Int16Array> {
    // Checked again at read time: the link may have been swapped since list().
    const inside = await fileInside(this.dir, asset.file);
    if (!inside) throw new AssetError('not_found', `no asset named "${asset.name}"`);
    const key = [inside.path, inside.bytes, inside.mtimeMs, rate].join('\0');
    if (this.lastDecoded?.key === key) return this.lastDecoded.pcm;
    const data = new Uint8Array(await readFile(inside.path));
    let pcm: Int16Array;
    try {
      const decoded = await decodeAny(data, extname(asset.file).toLowerCase());
      pcm = resample(decoded.pcm, decoded.sampleRate, rate);
    } catch (error) {
      throw new AssetError('undecodable', `cannot decode ${asset.file}: ${(error as Error).message}`);
    }
    this.lastDecoded = { key, pcm };
    return pcm;
  }
}

async function decodeAny(data: Uint8Array, ext: string): Promise<{ pcm: Int16Array; sampleRate: number }> {
  if (ext === '.wav') {
    const wav = decodeWav(data);
    return { pcm: wav.pcm, sampleRate: wav.sampleRate };
  }
  if (ext === '.mp3') {
    const { MPEGDecoder } = await import('mpg123-decoder');
    const decoder = new MPEGDecoder();
    await decoder.ready;
    try {
      return toMono(decoder.decode(data));
    } finally {
      decoder.free();
    }
  }
  // .ogg may be Opus or Vorbis; .opus is Ogg Opus.
  const { OggOpusDecoder } = await import('ogg-opus-decoder');
  const opus = new OggOpusDecoder();
  await opus.ready;
  try {
    const decoded = await opus.decodeFile(data);
    if (decoded.samplesDecoded > 0) return toMono(decoded);
  } catch {
    // not Opus ("does not support this codec vorbis"): try Vorbis below
  } finally {
    opus.free();
  }
  const { OggVorbisDecoder } = await import('@wasm-audio-decoders/ogg-vorbis');
  const vorbis = new OggVorbisDecoder();
  await vorbis.ready;
  try {
    return toMono(await vorbis.decodeFile(data));
  } finally {
    vorbis.free();
  }
}

function toMono(decoded: { channelData: Float32Array[]; samplesDecoded: number; sampleRate: number }): {
  pcm: Int16Array;
  sampleRate: number;
} {
  const channels = decoded.channelData;
  if (channels.length === 0 || decoded.samplesDecoded === 0) throw new Error('no audio decoded');
  const pcm = new Int16Array(decoded.samplesDecoded);
  for (let i = 0; i < pcm.length; i++) {
    let sum = 0;
    for (const channel of channels) sum += channel[i] ?? 0;
    const v = (sum / channels.length) * 32767;
    pcm[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : Math.round(v);
  }
  return { pcm, sampleRate: decoded.sampleRate };
}
