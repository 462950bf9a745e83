# syntax=docker/dockerfile:1
# Each step is a command CI runs on every change (npm ci, npm run build, and in test/build/start.test.ts
# npm ci --omit=dev, then npm start, npm run migrate and npm run ledger:copy in what this image holds).
# Node 24, the current LTS (Node 20's life ended in April 2026); the package states Node 22 or later,
# what its dependencies install on without a warning.
FROM node:24-bookworm-slim AS build
WORKDIR /app
# No compiler: every native package installs a prebuilt binary from the registry (the file
# ledger's SQLite driver among them).
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY adapters ./adapters
# The sandbox (nothing configured) runs the simulator in the bridge's process.
COPY simulator ./simulator
COPY model-check ./model-check
COPY scripts ./scripts
RUN npm run build

# Production dependencies only, from the lockfile: no TypeScript, no test tools.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
ENV NODE_ENV=production PORT=8080 LEDGER_URL=file:/data/ledger.json
WORKDIR /app
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# npm start, npm run migrate and npm run ledger:copy go through scripts/start.mjs, which builds
# nothing here (there is no TypeScript): it runs dist/.
COPY scripts/build.mjs scripts/start.mjs ./scripts/
COPY config ./config
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Node as PID 1 receives SIGTERM directly and shuts down gracefully.
CMD ["node", "dist/src/main.js"]
