// Builds the console into dist/console, which the gateway serves at /console (src/http/consoleFiles.ts).
// JSX is Preact's through esbuild's own transform: no Babel preset needed.
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: '../dist/console',
    emptyOutDir: true,
    target: 'es2022',
    // Every script is a file of its own: the CSP allows no inline script, and Vite inlines none.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: true,
  },
});
