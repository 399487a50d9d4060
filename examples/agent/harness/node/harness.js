// The to-do harness of ../todo_harness.py, in JavaScript: a bring-your-own harness in another
// language is any process serving proto/evalsi/harness/v1alpha1/harness.proto over gRPC.
// evalsi starts it (harness: {command: {argv: [node, harness.js]}}) with the unix socket path
// to serve on in EVALSI_HARNESS_SOCKET, and stops it after the run.
//
//   npm install @grpc/grpc-js@1.14.0 @grpc/proto-loader@0.8.0
"use strict";
const fs = require("fs");
const path = require("path");
const grpc = require("@grpc/grpc-js");
const loader = require("@grpc/proto-loader");

const PROTO_ROOT = process.env.EVALSI_PROTO_ROOT || path.resolve(__dirname, "../../../../proto");
const definition = loader.loadSync("evalsi/harness/v1alpha1/harness.proto", {
  includeDirs: [PROTO_ROOT],
  keepCase: true,
  longs: Number,
  defaults: true,
  oneofs: true,
});
const { HarnessService } = grpc.loadPackageDefinition(definition).evalsi.harness.v1alpha1;

const tasks = new Map();
let next = 0;

function text(content) {
  return content && content.kind === "text" ? content.text : JSON.stringify(content);
}

const service = {
  Describe(_call, done) {
    done(null, {
      name: "todo-node",
      version: "1.0",
      tools: [{ name: "add_item", description: "Add a to-do item", permission: "write" }],
    });
  },
  Setup(call, done) {
    const session = `node-${next++}`;
    tasks.set(session, call.request);
    done(null, { session });
  },
  Run(call) {
    const task = tasks.get(call.request.session);
    const file = path.join(task.workspace, "todo.json");
    const items = JSON.parse(fs.readFileSync(file, "utf8")).items;
    const item = text(task.input);
    const began = BigInt(Date.now()) * 1000000n;
    items.push(item);
    fs.writeFileSync(file, JSON.stringify({ items }));
    call.write({
      step: {
        kind: "STEP_KIND_TOOL_CALL",
        name: "add_item",
        input: { structValue: { fields: { item: { stringValue: item } } } },
        output: { structValue: { fields: { count: { numberValue: items.length } } } },
        tool_call: {
          name: "add_item",
          arguments: { structValue: { fields: { item: { stringValue: item } } } },
        },
        start_time_unix_nano: began.toString(),
        end_time_unix_nano: (BigInt(Date.now()) * 1000000n).toString(),
      },
    });
    call.write({ final: { output: { text: `${items.length} items` }, stop_reason: "final_answer" } });
    call.end();
  },
  Check(call, done) {
    const task = tasks.get(call.request.session);
    const items = JSON.parse(fs.readFileSync(path.join(task.workspace, "todo.json"), "utf8")).items;
    done(null, {
      checks: [{ name: "item-added", passed: items.includes(text(task.input)) }],
      end_state: {
        structValue: {
          fields: { items: { listValue: { values: items.map((i) => ({ stringValue: i })) } } },
        },
      },
    });
  },
  Teardown(call, done) {
    tasks.delete(call.request.session);
    done(null, {});
  },
};

const server = new grpc.Server();
server.addService(HarnessService.service, service);
const address = process.argv[2] || `unix:${process.env.EVALSI_HARNESS_SOCKET}`;
server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error) => {
  if (error) {
    console.error(`todo-node: cannot listen on ${address}: ${error.message}`);
    process.exit(1);
  }
});
process.on("SIGTERM", () => server.tryShutdown(() => process.exit(0)));
