// Upload a file with tus-js-client's Node build, abort it once `abortAt` bytes have been sent (mid-request when the
// file goes in one PATCH), then resume it from the server's offset (HEAD) with a new Upload on the same URL.
// Usage: node tus_upload.mjs <endpoint> <token> <file> <destinationId> <abortAt> [chunkSize]
// Prints one JSON line: {"path": <Media-Path>, "uploadUrl": ..., "resumedFrom": <offset the resumed upload saw>}.
import fs from "node:fs";
import path from "node:path";
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

const first = await new Promise((resolve) => {
  let aborted = false;
  const upload = new tus.Upload(fs.createReadStream(file), options({
    onProgress(sent) {
      if (!aborted && sent >= abortAt) {
        aborted = true;
        upload.abort(false).then(() => resolve(upload.url));
      }
    },
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
