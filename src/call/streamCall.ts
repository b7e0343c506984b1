// In charge of a ?stream=true export from the executor's side: rows flow from the source's cursor
// in batches, masked, rendered and posted to the acceptor one chunk at a time; each chunk waits for
// the acceptor's credit, so a slow client holds the cursor back. QUERYAPIGATE_STREAM_MAX_ROWS ends
// the export early with a final truncation line. The run is recorded when the stream ends.
import type { MessagePort } from 'node:worker_threads';
import type { Source } from '../sources/types.js';
import { GatewayError } from '../contract/errors.js';
import type { Answer } from '../contract/exchange.js';
import type { StreamCredit, StreamFrame } from '../contract/messages.js';
import type { CallContext } from './context.js';
import { CONTENT_TYPES } from './formats.js';
import { openStreamEncoder, type StreamEncoder, typesAfterMask } from './formats/index.js';
import type { Governed } from './govern.js';
import { namedParamError, writerFor, type CallPlan } from './plan.js';
import { record, type RunTarget } from './record.js';
import { STREAM_FORMATS, type CallRequest } from './request.js';
import { logger } from '../log.js';

/** Chunks in flight between executor and acceptor before the cursor waits. */
const WINDOW = 2;
const BATCH_ROWS = 1000;

class ClientGone extends Error {}
class Truncated extends Error {}

/** The request's stream options, checked before anything runs. */
export function checkStream(req: CallRequest, plan: CallPlan, port: MessagePort | undefined): MessagePort {
  if (!port) throw new GatewayError('invalid_stream', 'stream=true goes in the query string');
  if (!STREAM_FORMATS.includes(req.format)) {
    throw new GatewayError('invalid_stream', `stream=true only supports these formats: ${STREAM_FORMATS.join(', ')}`);
  }
  if (req.page !== null || req.pageSize !== null) {
    throw new GatewayError('invalid_stream', 'stream=true exports the whole result and does not accept page/page_size');
  }
  if (plan.write) throw new GatewayError('read_only', 'A stream is always read-only');
  return port;
}

export async function streamCall(
  ctx: CallContext,
  port: MessagePort,
  req: CallRequest,
  plan: CallPlan,
  source: Source,
  values: unknown[],
  timeoutS: number,
  governed: Governed,
  run: RunTarget,
  fileName: string,
  caller: string,
  requestId: string,
): Promise<Answer> {
  const post = (f: StreamFrame) => port.postMessage(f);
  let credits = WINDOW;
  let gone = false;
  let wake: (() => void) | null = null;
  port.on('message', (m: StreamCredit) => {
    if (m.t === 'more') credits++;
    else gone = true;
    wake?.();
  });
  const credit = async () => {
    while (credits <= 0 && !gone) await new Promise<void>((r) => (wake = r));
    wake = null;
    if (gone) throw new ClientGone();
    credits--;
  };

  const max = ctx.config.streamMaxRows;
  const labels = { connection: run.connectionName, dialect: source.dialect };
  const started = performance.now();
  let headed = false;
  let sent = 0;
  let truncated = false;
  let failed: Pick<GatewayError, 'code' | 'message'> | null = null;
  const head = () => {
    if (headed) return;
    headed = true;
    post({
      t: 'head',
      status: 200,
      key: caller,
      headers: ['Content-Type', CONTENT_TYPES[req.format], 'Content-Disposition', `attachment; filename="${fileName}.${req.format}"`],
    });
  };
  let encoder: StreamEncoder | null = null;
  // A binary chunk owns its buffer (parquet.ts): it is moved to the acceptor, not copied.
  const postData = (chunk: string | Uint8Array) =>
    typeof chunk === 'string' ? post({ t: 'data', chunk }) : port.postMessage({ t: 'data', chunk } satisfies StreamFrame, [chunk.buffer as ArrayBuffer]);
  try {
    await source.stream(
      plan.text,
      values,
      { timeoutMs: timeoutS * 1000, readOnly: true, resetSession: governed.resetSession === true, batchRows: BATCH_ROWS },
      async (cols, batch, types) => {
        if (gone) throw new ClientGone();
        let rows = batch;
        if (max > 0 && sent + rows.length >= max) {
          truncated = sent + rows.length > max;
          rows = rows.slice(0, max - sent);
        }
        let columns = cols;
        if (governed.masker && rows.length) ({ columns, rows } = governed.masker(columns, rows)); // every row, before rendering
        if (!encoder) {
          encoder = openStreamEncoder(writerFor(plan, columns, req.format), columns, rows, typesAfterMask(cols, types, columns));
          head();
          if (encoder.head.length) postData(encoder.head);
        }
        if (rows.length) {
          const chunk = await encoder.rows(rows);
          if (chunk.length) {
            await credit();
            postData(chunk);
          }
          sent += rows.length;
        }
        if (truncated) throw new Truncated();
      },
    );
  } catch (e) {
    if (!(e instanceof Truncated)) {
      if (!headed) throw namedParamError(plan, e); // before the first byte: an ordinary JSON error
      failed = {
        code: e instanceof GatewayError ? e.code : 'internal_error',
        message: e instanceof ClientGone ? 'The client closed the stream' : e instanceof GatewayError ? e.message : 'The stream failed',
      };
      if (!(e instanceof ClientGone) && !(e instanceof GatewayError)) logger('call').error({ request_id: requestId, key: caller, err: e }, 'stream failed');
    }
  } finally {
    port.removeAllListeners('message');
  }
  head();
  if (encoder && !failed) {
    // The rest of the file (parquet's last row group and footer, xlsx's workbook parts and zip
    // directory), or the text formats' truncation line.
    try {
      const last = await (encoder as StreamEncoder).end(truncated ? sent : null);
      if (last.length) postData(last);
    } catch (e) {
      failed = { code: e instanceof GatewayError ? e.code : 'internal_error', message: 'The stream failed' };
      logger('call').error({ request_id: requestId, key: caller, err: e }, 'stream failed');
    }
  }
  post({ t: failed ? 'fail' : 'end' });
  port.close();
  record(ctx.runs, run, caller, requestId, sent, Math.round(performance.now() - started), null, governed.masked, failed);
  ctx.metrics.streamExports.inc({ ...labels, status: failed ? 'error' : truncated ? 'truncated' : 'success', key: caller });
  ctx.metrics.rows.inc({ ...labels, key: caller }, sent);
  return { status: 200, headers: [], body: '', streamed: true };
}
