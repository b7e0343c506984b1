# syntax=docker/dockerfile:1
# QueryAPIGate image: `docker build -t queryapigate .`
#   docker run -p 5000:5000 -v qag-data:/data queryapigate
# The store (SQLite) lives in /data unless QUERYAPIGATE_DATABASE_URL points at PostgreSQL.

# ---- build: compile TypeScript, then drop dev dependencies -------------------
FROM node:20-bookworm-slim AS build
WORKDIR /app

# Toolchain for native modules (better-sqlite3) when no prebuilt binary can be fetched.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*

COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

COPY tsconfig.json ./
COPY src ./src
COPY workers ./workers
# The console (Vite + Preact), built into dist/console and served at /console.
COPY console ./console
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && npm cache clean --force

# Slim node_modules (187 MB -> ~57 MB): µWebSockets.js ships binaries for every
# platform/ABI and loads exactly uws_<platform>_<arch>_<abi>.node; typescript survives
# `npm prune` as valibot's optional peer; better-sqlite3 keeps its build intermediates
# and sources when compiled here.
RUN uws=node_modules/uWebSockets.js/binaries \
 && keep="uws_linux_$(node -p process.arch)_$(node -p process.versions.modules).node" \
 && { [ ! -d "$uws" ] || { test -f "$uws/$keep" && find "$uws" -name '*.node' ! -name "$keep" -delete; }; } \
 && rm -rf node_modules/typescript node_modules/.bin/tsc node_modules/.bin/tsserver \
      node_modules/better-sqlite3/build/Release/obj node_modules/better-sqlite3/build/Release/obj.target \
      node_modules/better-sqlite3/deps node_modules/better-sqlite3/src

# ---- runtime -------------------------------------------------------------------
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production \
    QUERYAPIGATE_HOST=0.0.0.0 \
    QUERYAPIGATE_PORT=5000 \
    QUERYAPIGATE_HOME=/data

# package.json is needed at runtime: its "type": "module" makes dist/*.js ESM.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist

RUN mkdir -p /data && chown node:node /data
VOLUME /data
EXPOSE 5000
USER node

HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.QUERYAPIGATE_PORT || 5000) + '/health', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# node runs as PID 1 and handles SIGTERM itself (finishes calls in flight, then exits); --single-threaded-gc:
# V8 collects without helper threads; --max-semi-space-size=8: the main thread's young generation 24 MB, as the
# executors' (src/serve.ts GC_FLAG, YOUNG_FLAG); as the server is measured.
CMD ["node", "--single-threaded-gc", "--max-semi-space-size=8", "dist/src/main.js", "serve"]
