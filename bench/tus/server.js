// Reference tus server for bench/upload_bench.py: @tus/server with @tus/file-store, as its README shows.
// Usage: node server.js <port> <directory>; prints "ready" once it listens on 127.0.0.1.
import { Server } from "@tus/server";
import { FileStore } from "@tus/file-store";

const [port, directory] = process.argv.slice(2);
const server = new Server({ path: "/files", datastore: new FileStore({ directory }) });
server.listen({ host: "127.0.0.1", port: Number(port) }, () => console.log("ready"));
