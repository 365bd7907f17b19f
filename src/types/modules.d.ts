// Packages that ship no type declarations.
declare module '@echogarden/speex-resampler-wasm' {
  const factory: () => Promise<unknown>;
  export default factory;
}
