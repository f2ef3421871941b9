// Drives kforge's MCP server with the official TypeScript SDK client (the test harness of
// tests/integration/test_mcp_ts_sdk.py).
//
// Usage: node ts_client.mjs <plan.json>
// The plan names the transport ({"url": ...} or {"command": ..., "args": [...], "env": {...}}),
// the revision ("2025-11-25": the v1 SDK, @modelcontextprotocol/sdk, through initialize;
// "2026-07-28": the v2 SDK, @modelcontextprotocol/client, pinned to that revision, stateless)
// and the tool arguments to use ("compare", "evaluate", "sleepy"). The script lists the tools,
// calls compare_kernels and evaluate_kernel with progress, cancels a long evaluate_kernel
// with an AbortSignal, polls get_job_status until the job is terminal, and prints one JSON
// report on stdout. It exits non-zero only when it could not run; the assertions are the
// Python test's.
import { readFileSync } from 'node:fs';
import * as v1 from '@modelcontextprotocol/sdk/client/index.js';
import * as v1http from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import * as v1stdio from '@modelcontextprotocol/sdk/client/stdio.js';
import * as v2 from '@modelcontextprotocol/client';
import * as v2stdio from '@modelcontextprotocol/client/stdio';

const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const modern = plan.revision === '2026-07-28';
const Client = modern ? v2.Client : v1.Client;
const StreamableHTTPClientTransport = modern
  ? v2.StreamableHTTPClientTransport
  : v1http.StreamableHTTPClientTransport;
const StdioClientTransport = modern ? v2stdio.StdioClientTransport : v1stdio.StdioClientTransport;
// v1's callTool(params, resultSchema, options); v2's callTool(params, options).
const callTool = (client, params, options) =>
  modern ? client.callTool(params, options) : client.callTool(params, undefined, options);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function transportFor(p) {
  if (p.url) return new StreamableHTTPClientTransport(new URL(p.url));
  return new StdioClientTransport({
    command: p.command,
    args: p.args ?? [],
    env: { ...process.env, ...(p.env ?? {}) },
    stderr: 'inherit',
  });
}

async function callWithProgress(client, name, args) {
  const progress = [];
  const result = await callTool(client, { name, arguments: args }, {
    onprogress: (p) => progress.push(p),
    timeout: 300000,
    resetTimeoutOnProgress: true,
  });
  return { isError: result.isError ?? false, structured: result.structuredContent ?? null,
           text: result.content.map((c) => c.text ?? '').join('\n'), progress };
}

async function cancelLongJob(client, args) {
  const controller = new AbortController();
  let jobId = null;
  let sawCorrectness = false;
  const call = callTool(client, { name: 'evaluate_kernel', arguments: args }, {
    signal: controller.signal,
    timeout: 300000,
    onprogress: (p) => {
      const m = /job ([0-9a-f]+)/.exec(p.message ?? '');
      if (m) jobId = m[1];
      if ((p.message ?? '').includes('correctness')) sawCorrectness = true;
    },
  });
  const outcome = call.then(() => 'returned', (e) => `rejected: ${e.message}`);
  const deadline = Date.now() + 120000;
  while (!sawCorrectness && Date.now() < deadline) await sleep(50);
  controller.abort('the test cancels the long job');
  const callOutcome = await outcome;
  let status = null;
  let statusText = null;
  while (jobId && Date.now() < deadline) {
    const r = await client.callTool({ name: 'get_job_status', arguments: { job_id: jobId } });
    status = r.structuredContent.state;
    statusText = r.content[0].text;
    if (!['queued', 'running'].includes(status)) break;
    await sleep(200);
  }
  return { jobId, sawCorrectness, callOutcome, status, statusText };
}

const client = modern
  ? new Client(
      { name: 'kforge-ts-test', version: '2.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    )
  : new Client({ name: 'kforge-ts-test', version: '1.0.0' });
await client.connect(transportFor(plan.transport));
const report = {
  serverVersion: client.getServerVersion(),
  protocolVersion: modern
    ? client.getNegotiatedProtocolVersion() ?? null
    : plan.transport.url ? client.transport.protocolVersion ?? null : null,
  tools: (await client.listTools()).tools.map((t) => t.name),
};
report.compare = await callWithProgress(client, 'compare_kernels', plan.compare);
report.evaluate = await callWithProgress(client, 'evaluate_kernel', plan.evaluate);
report.invalid = await callWithProgress(client, 'evaluate_kernel', plan.invalid);
report.cancel = await cancelLongJob(client, plan.sleepy);
await client.close();
process.stdout.write(JSON.stringify(report) + '\n');
