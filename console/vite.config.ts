import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

declare const process: { env: Record<string, string | undefined> }

// The service under test for `npm run dev` (AP_CONSOLE_API, default the local `agent-platform serve`).
const apiTarget = process.env.AP_CONSOLE_API ?? 'http://127.0.0.1:8765'
const apiPaths = [
  '/chat',
  '/getConversation',
  '/conversations',
  '/api',
  '/agents',
  '/orgSettings',
  '/kb',
  '/upload',
  '/skills',
  '/admin',
  '/storage',
  '/files',
  '/console/config.json',
  '/console/sign-in',
]

export default defineConfig({
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 600,
  },
  server: {
    host: '127.0.0.1',
    port: 5173,
    proxy: Object.fromEntries(apiPaths.map((path) => [path, { target: apiTarget, changeOrigin: false }])),
  },
})
