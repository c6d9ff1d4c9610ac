// The reference client of bench/cli_upload_bench.py: tus-js-client's Node build uploading one file with its
// defaults (the whole file in one PATCH, no parallel uploads), as its README shows; retries are off (a failure ends
// the benchmark) and no fingerprint is stored (each run is a new upload).
// Usage: node js_upload.mjs <endpoint> <file>; prints the upload's URL once the server has every byte.
import fs from "node:fs";
import path from "node:path";
import * as tus from "tus-js-client";

const [endpoint, file] = process.argv.slice(2);
const upload = new tus.Upload(fs.createReadStream(file), {
  endpoint,
  uploadSize: fs.statSync(file).size,
  metadata: { filename: path.basename(file), filetype: "video/mp4" },
  retryDelays: [],
  storeFingerprintForResuming: false,
  onError(error) {
    console.error(`tus upload failed: ${error}`);
    process.exit(1);
  },
  onSuccess() {
    console.log(upload.url);
  },
});
upload.start();
