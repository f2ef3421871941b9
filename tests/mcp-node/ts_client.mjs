// Drives kforge's MCP server with the official TypeScript SDK client (the test harness of
// tests/integration/test_mcp_ts_sdk.py).
//
// Usage: node ts_client.mjs <plan.json>
// The plan names the transport ({"url": ...} or {"command": ..., "args": [...], "env": {...}})
// and the tool arguments to use ("compare", "evaluate", "sleepy"). The script lists the tools,
// calls compare_kernels and evaluate_kernel with progress, cancels a long evaluate_kernel
// with an AbortSignal, polls get_job_status until the job is terminal, and prints one JSON
// report on stdout. It exits non-zero only when it could not run; the assertions are the
// Python test's.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
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
  const result = await client.callTool({ name, arguments: args }, undefined, {
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
  const call = client.callTool({ name: 'evaluate_kernel', arguments: args }, undefined, {
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

const client = new Client({ name: 'kforge-ts-test', version: '1.0.0' });
await client.connect(transportFor(plan.transport));
const report = {
  serverVersion: client.getServerVersion(),
  protocolVersion: plan.transport.url ? client.transport.protocolVersion ?? null : null,
  tools: (await client.listTools()).tools.map((t) => t.name),
};
report.compare = await callWithProgress(client, 'compare_kernels', plan.compare);
report.evaluate = await callWithProgress(client, 'evaluate_kernel', plan.evaluate);
report.invalid = await callWithProgress(client, 'evaluate_kernel', plan.invalid);
report.cancel = await cancelLongJob(client, plan.sleepy);
await client.close();
process.stdout.write(JSON.stringify(report) + '\n');
