// Reference tus server on S3 for bench/shared_upload_bench.py: @tus/server with @tus/s3-store, as its README shows.
// Usage: node s3-server.js <port> <bucket> <part size in bytes>; the endpoint and credentials come from the
// environment (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION). Path-style
// addressing, as an S3 gateway on 127.0.0.1 needs. Prints "ready" once it listens on 127.0.0.1.
import { Server } from "@tus/server";
import { S3Store } from "@tus/s3-store";

const [port, bucket, partSize] = process.argv.slice(2);
const datastore = new S3Store({
  partSize: Number(partSize),
  s3ClientConfig: {
    bucket,
    region: process.env.AWS_DEFAULT_REGION,
    endpoint: process.env.AWS_ENDPOINT_URL_S3,
    forcePathStyle: true,
    credentials: {
      accessKeyId: process.env.AWS_ACCESS_KEY_ID,
      secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY,
    },
  },
});
const server = new Server({ path: "/files", datastore });
server.listen({ host: "127.0.0.1", port: Number(port) }, () => console.log("ready"));
