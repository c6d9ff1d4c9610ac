// Upload a file with tus-js-client's Node build, abort it once `abortAt` bytes have been sent (mid-request when the
// file goes in one PATCH), then resume it from the server's offset (HEAD) with a new Upload on the same URL.
// The first upload's body stops after `abortAt` bytes, as a client's whose connection hangs, and the upload is
// aborted a moment later: aborting on a progress report instead raced the body, since tus-js-client reports at most
// every 100 ms and a loopback server can take the whole file in less.
// Usage: node tus_upload.mjs <endpoint> <token> <file> <destinationId> <abortAt> [chunkSize]
// Prints one JSON line: {"path": <Media-Path>, "uploadUrl": ..., "resumedFrom": <offset the resumed upload saw>}.
import fs from "node:fs";
import path from "node:path";
import { PassThrough } from "node:stream";
import * as tus from "tus-js-client";

const [endpoint, token, file, destinationId, abortAtText, chunkSizeText] = process.argv.slice(2);
const abortAt = Number(abortAtText);
const chunkSize = chunkSizeText ? Number(chunkSizeText) : Infinity;
const size = fs.statSync(file).size;

function options(extra) {
  return {
    endpoint,
    chunkSize,
    uploadSize: size,
    headers: { "x-service-api-org": token },
    metadata: { destinationId, filename: path.basename(file) },
    retryDelays: [0, 300, 1000, 2000, 4000],
    storeFingerprintForResuming: false,
    ...extra,
  };
}

function fail(error) {
  console.error(`tus upload failed: ${error}`);
  process.exit(1);
}

const timer = setTimeout(() => fail("timed out"), 120000);

// A tus-js-client file reader whose bodies send the file's bytes up to `stopAt`: a body that ends before it ends
// whole, and the one that reaches it stops there without ending, `onStopped` called once its bytes are sent.
function readerStoppingAt(stopAt, onStopped) {
  return {
    async openFile() {
      return {
        size,
        async slice(start, end) {
          const body = new PassThrough();
          const last = Math.min(end, stopAt);
          const stops = last < end;
          if (last > start) {
            const part = fs.createReadStream(file, { start, end: last - 1 });
            part.pipe(body, { end: !stops });
            if (stops) part.on("end", onStopped);
          } else {
            onStopped();
          }
          body.size = end - start;  // as tus-js-client's own file reader gives its streams
          return { value: body, done: end >= size };
        },
        close() {},
      };
    },
  };
}

const first = await new Promise((resolve) => {
  const upload = new tus.Upload(fs.createReadStream(file), options({
    fileReader: readerStoppingAt(abortAt, () => setTimeout(() => upload.abort(false).then(() => resolve(upload.url)),
                                                           500)),
    onSuccess: () => resolve(upload.url),
    onError: fail,
  }));
  upload.start();
});

// As a user resuming a little later would: the server has committed what the aborted PATCH delivered by then.
await new Promise((resolve) => setTimeout(resolve, 1000));
let mediaPath = null;
let resumedFrom = null;
await new Promise((resolve) => {
  const upload = new tus.Upload(fs.createReadStream(file), options({
    uploadUrl: first,
    onAfterResponse(req, res) {
      if (req.getMethod() === "HEAD" && resumedFrom === null) resumedFrom = Number(res.getHeader("Upload-Offset"));
      mediaPath = res.getHeader("Media-Path") || mediaPath;
    },
    onSuccess: resolve,
    onError: fail,
  }));
  upload.start();
});
clearTimeout(timer);
console.log(JSON.stringify({ path: mediaPath, uploadUrl: first, resumedFrom }));
