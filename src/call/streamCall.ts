// In charge of a ?stream=true export from the executor's side: rows flow from the source's cursor
// in batches, masked, rendered and posted to the acceptor in chunks; what was posted and not yet
// credited back by the acceptor is bounded in bytes, so a slow client holds the cursor back and
// memory stays flat. Text formats write their rows as bytes into recycled frame buffers, from the
// database's own text where the source gives it (no mask to apply). QUERYAPIGATE_STREAM_MAX_ROWS
// ends the export early with a final truncation line. The run is recorded when the stream ends.
import type { MessagePort } from 'node:worker_threads';
import type { Source, StreamOptions } from '../sources/types.js';
import { GatewayError } from '../contract/errors.js';
import type { Answer } from '../contract/exchange.js';
import type { StreamCredit, StreamFrame } from '../contract/messages.js';
import type { CallContext } from './context.js';
import { CONTENT_TYPES } from './formats.js';
import { openStreamEncoder, type StreamEncoder, typesAfterMask } from './formats/index.js';
import { type ByteSink, compileTextRowEncoder, type TextRowEncoder } from './formats/streamText.js';
import type { Governed } from './govern.js';
import { namedParamError, writerFor, type CallPlan } from './plan.js';
import { record, type RunTarget } from './record.js';
import { STREAM_FORMATS, type CallRequest } from './request.js';
import { logger } from '../log.js';

/**
 * A text stream's rows go out in frames: buffers of FRAME_BYTES the rows are written into as bytes
 * (formats/streamText.ts), moved to the acceptor (transferred, not copied) and handed back with the
 * credit once the socket took them, so a stream reuses a few buffers from start to end.
 */
export const FRAME_BYTES = 256 * 1024;
/**
 * Bytes posted to the acceptor and not yet taken by the socket (counted by the buffers that carry
 * them) before the export waits: a slow client holds the cursor back with at most this in between,
 * plus the frame being filled. A single chunk larger than this still goes, alone.
 */
export const WINDOW_BYTES = 4 * FRAME_BYTES;
/** A frame filled less than this is sent as a copy of its bytes, and its buffer filled again. */
const COPY_BELOW = FRAME_BYTES / 4;
/**
 * Text formats: the next batch asks for about BATCH_BYTES of output (a frame's worth, with room for
 * rows longer than the last batch's), from the bytes a row took so far, within these row bounds.
 * Measured: large batches cut both the database's and the driver's work per row (one Execute per
 * batch), and bounding them by bytes keeps wide rows from holding megabytes of values at once.
 */
export const BATCH_BYTES = (FRAME_BYTES * 3) / 4;
const FIRST_BATCH_ROWS = 256;
const MIN_BATCH_ROWS = 16;
const MAX_BATCH_ROWS = 10_000;
/** xlsx and parquet: a fixed batch (parquet decides its column types on the first one). */
const BINARY_BATCH_ROWS = 1000;

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
  // A binary chunk owns its buffer (parquet.ts, or a frame): it is moved to the acceptor, not copied.
  const postData = (chunk: string | Uint8Array) =>
    typeof chunk === 'string' ? post({ t: 'data', chunk }) : port.postMessage({ t: 'data', chunk } satisfies StreamFrame, [chunk.buffer as ArrayBuffer]);
  // The window: the byte size of every data frame posted and not yet credited, oldest first (the
  // acceptor credits them in order), and the frame buffers it handed back.
  const posted: number[] = [];
  let inFlight = 0;
  const spare: ArrayBuffer[] = [];
  /** Set when the acceptor cancels: the client left, or it was cut off for reading nothing (http/respond.ts). */
  let gone: 'left' | 'stalled' | null = null;
  let wake: (() => void) | null = null;
  port.on('message', (m: StreamCredit) => {
    if (m.t === 'more') {
      inFlight -= posted.shift() ?? 0;
      if (m.buf?.byteLength === FRAME_BYTES && spare.length < WINDOW_BYTES / FRAME_BYTES) spare.push(m.buf);
    } else gone = m.stalled ? 'stalled' : 'left';
    wake?.();
  });
  const stopped = () =>
    gone === 'stalled'
      ? new GatewayError('stream_stalled', `The client read nothing for ${ctx.config.stallTimeout} s, so the stream was stopped`)
      : new ClientGone();
  /** Posts a chunk once the window has room for it (a string's bytes, or the bytes of the buffer it moves). */
  const send = async (chunk: string | Uint8Array) => {
    const bytes = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.buffer.byteLength;
    while (inFlight > 0 && inFlight + bytes > WINDOW_BYTES && !gone) await new Promise<void>((r) => (wake = r));
    wake = null;
    if (gone) throw stopped();
    posted.push(bytes);
    inFlight += bytes;
    postData(chunk);
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
  const text = req.format === 'csv' || req.format === 'tsv' || req.format === 'ndjson' ? req.format : null;
  const options: StreamOptions = {
    timeoutMs: timeoutS * 1000,
    readOnly: true,
    resetSession: governed.resetSession === true,
    batchRows: text ? FIRST_BATCH_ROWS : BINARY_BATCH_ROWS,
    // A text export without masking takes the values as the database's text where it can: most are
    // copied to the output as they are (formats/streamText.ts). A masker needs the values.
    raw: text !== null && !governed.masker,
  };
  let encoder: StreamEncoder | null = null;
  let rowEncoder: TextRowEncoder | null = null;
  let frame: ByteSink | null = null;

  /** Rows written into `frame` and not sent yet. */
  let framedRows = 0;
  /**
   * Text formats: the rows written into frames, each frame sent once full, the last one at the
   * batch's end; answers the bytes the rows took. `sent` counts the rows of the frames sent.
   */
  const sendRows = async (enc: TextRowEncoder, rows: unknown[][]): Promise<number> => {
    let bytes = 0;
    for (let i = 0; i < rows.length; ) {
      frame ??= { buf: new Uint8Array(spare.pop() ?? new ArrayBuffer(FRAME_BYTES)), pos: 0 };
      const before = frame.pos;
      const from = i;
      i = enc.write(rows, i, frame);
      bytes += frame.pos - before;
      framedRows += i - from;
      if (i === rows.length) break;
      if (frame.pos > 0) await sendFrame();
      else {
        // A row larger than a frame: a buffer of its own.
        const big: ByteSink = { buf: new Uint8Array(enc.rowBytes(rows[i]!)), pos: 0 };
        i = enc.write(rows, i, big);
        bytes += big.pos;
        await send(big.buf);
        sent++;
      }
    }
    if (frame && frame.pos > 0) await sendFrame();
    return bytes;
  };
  const sendFrame = async () => {
    const f = frame!;
    if (f.pos < COPY_BELOW) {
      const copy = f.buf.slice(0, f.pos); // a few bytes: the frame's buffer stays here for the next rows
      f.pos = 0;
      await send(copy);
    } else {
      frame = null;
      await send(f.buf.subarray(0, f.pos));
    }
    sent += framedRows;
    framedRows = 0;
  };

  try {
    await source.stream(plan.text, values, options, async (cols, batch, types, raw) => {
      if (gone) throw stopped();
      let rows = batch;
      if (max > 0 && sent + rows.length >= max) {
        truncated = sent + rows.length > max;
        rows = rows.slice(0, max - sent);
      }
      let columns = cols;
      if (governed.masker && rows.length) ({ columns, rows } = governed.masker(columns, rows)); // every row, before rendering
      if (!encoder) {
        const writer = writerFor(plan, columns, req.format);
        encoder = await openStreamEncoder(writer, columns, rows, typesAfterMask(cols, types, columns));
        if (text) rowEncoder = compileTextRowEncoder(columns, text, raw);
        head();
        if (encoder.head.length) await send(encoder.head);
      }
      if (rows.length) {
        if (rowEncoder) {
          const bytes = await sendRows(rowEncoder, rows);
          options.batchRows = Math.min(MAX_BATCH_ROWS, Math.max(MIN_BATCH_ROWS, Math.floor((BATCH_BYTES * rows.length) / Math.max(1, bytes))));
        } else {
          const chunk = await encoder.rows(rows);
          if (chunk.length) await send(chunk);
          sent += rows.length;
        }
      }
      if (truncated) throw new Truncated();
      // Past the row cap one more row is enough to know the export is cut.
      if (max > 0) options.batchRows = Math.max(1, Math.min(options.batchRows, max - sent + 1));
    });
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
      // The window is not waited on: the export's last bytes go out whatever the client reads.
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
