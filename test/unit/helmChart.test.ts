// The Helm chart (deploy/helm/queryapigate), without helm: its templates rendered by test/helmRender.ts
// are the committed deploy/helm/rendered.yaml, every manifest is valid against the Kubernetes schemas
// (kubernetes-models), the optional ones too, and its settings are config.ts's and match the image.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';
import { loadConfig, unknownVariables } from '../../src/config.js';
import { chartValues, RENDERED, renderChart } from '../helmRender.js';

// biome-ignore lint/suspicious/noExplicitAny: manifests are read field by field, each read checked by an assertion
type Manifest = any;

const MODELS: Record<string, new (m: Manifest) => { validate(): void }> = {
  ConfigMap,
  Secret,
  Service,
  Deployment,
  PodDisruptionBudget,
  HorizontalPodAutoscaler,
  ServiceMonitor,
};

function manifests(text: string): Manifest[] {
  return parseAllDocuments(text).map((d) => {
    assert.deepEqual(d.errors, [], 'each document parses');
    return d.toJS();
  });
}

function validate(m: Manifest) {
  const Model = MODELS[m.kind];
  assert.ok(Model, `a validator for ${m.kind}`);
  assert.doesNotThrow(() => new Model(m).validate(), `${m.kind} ${m.metadata?.name} is valid`);
}

const byKind = (ms: Manifest[], kind: string) => ms.find((m) => m.kind === kind);

test('the committed rendered.yaml is what the chart renders with its default values', () => {
  assert.equal(readFileSync(RENDERED, 'utf8'), renderChart(), 'regenerate: npm run build && node dist/test/helmRender.js --print > deploy/helm/rendered.yaml');
});

test('every rendered manifest is valid against the Kubernetes schemas; HPA and ServiceMonitor only when enabled', () => {
  const ms = manifests(renderChart());
  assert.deepEqual(ms.map((m) => m.kind).sort(), ['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Secret', 'Service']);
  for (const m of ms) validate(m);
  assert.equal(byKind(ms, 'Deployment').spec.replicas, chartValues().replicaCount);

  const all = manifests(renderChart({ autoscaling: { enabled: true }, serviceMonitor: { enabled: true } }));
  for (const m of all) validate(m);
  const hpa = byKind(all, 'HorizontalPodAutoscaler');
  assert.equal(hpa.spec.scaleTargetRef.name, byKind(all, 'Deployment').metadata.name);
  assert.equal(byKind(all, 'Deployment').spec.replicas, undefined, 'the HPA owns the replica count');
  assert.deepEqual(byKind(all, 'ServiceMonitor').spec.endpoints[0].path, '/metrics');
  assert.equal(byKind(all, 'ServiceMonitor').spec.endpoints[0].port, byKind(all, 'Service').spec.ports[0].name);

  // The validator does refuse a broken manifest.
  const broken = structuredClone(byKind(ms, 'Deployment'));
  broken.spec.replicas = 'three';
  assert.throws(() => new Deployment(broken).validate(), /replicas/);
});

test("the chart's settings are config.ts's, their values parse, and the metadata cache is off by default", () => {
  const values = chartValues() as { config: Record<string, string>; secret: Record<string, string> };
  const env = { ...values.config, ...values.secret };
  assert.deepEqual(unknownVariables(env), [], 'every variable is a setting');
  const config = loadConfig(env, () => undefined);
  assert.equal(config.metadataCacheTtl, 0);
  assert.ok(config.databaseUrl, 'a shared PostgreSQL store');
  assert.ok(config.redisUrl, 'a shared Redis');

  const ms = manifests(renderChart());
  assert.deepEqual(Object.keys(byKind(ms, 'ConfigMap').data).sort(), Object.keys(values.config).sort());
  assert.deepEqual(Object.keys(byKind(ms, 'Secret').stringData).sort(), Object.keys(values.secret).sort());
});

test('the Deployment fits the image: its port, /health probes, settings from the ConfigMap and Secret, time to drain', () => {
  const ms = manifests(renderChart());
  const pod = byKind(ms, 'Deployment').spec.template.spec;
  const [c] = pod.containers;
  const dockerfile = readFileSync(fileURLToPath(new URL('../../../Dockerfile', import.meta.url)), 'utf8');
  const imagePort = Number(/QUERYAPIGATE_PORT=(\d+)/.exec(dockerfile)?.[1]);
  assert.deepEqual(c.ports, [{ name: 'http', containerPort: imagePort }]);
  for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe']) assert.deepEqual(c[probe].httpGet, { path: '/health', port: 'http' }, probe);
  assert.deepEqual(
    c.envFrom.map((e: Manifest) => e.configMapRef?.name ?? e.secretRef?.name),
    [byKind(ms, 'ConfigMap').metadata.name, byKind(ms, 'Secret').metadata.name],
  );
  assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory, 'resources set');
  const { queryTimeout } = loadConfig({}, () => undefined);
  const pause = Number(c.lifecycle.preStop.exec.command[1]);
  assert.ok(pod.terminationGracePeriodSeconds > pause + queryTimeout, 'a call in flight at SIGTERM has its whole time limit to finish');
  assert.equal(c.volumeMounts.find((v: Manifest) => v.name === 'data').mountPath, /QUERYAPIGATE_HOME=(\S+)/.exec(dockerfile)?.[1]);
  const selector = byKind(ms, 'Service').spec.selector;
  assert.deepEqual(byKind(ms, 'PodDisruptionBudget').spec.selector.matchLabels, selector);
  for (const [k, v] of Object.entries(selector)) assert.equal(byKind(ms, 'Deployment').spec.template.metadata.labels[k], v);
});
