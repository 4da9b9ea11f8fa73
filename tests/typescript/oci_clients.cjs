// Oracle's TypeScript SDK (oci-streaming, oci-objectstorage), unmodified, against the endpoint it is given: the
// calls a consumer written in TypeScript makes. One JSON line per step on stdout; tests/emulator/test_typescript_sdk.py
// runs it and checks each step, and what ocigroup sees afterwards.
// usage: node oci_clients.cjs CONFIG_FILE ENDPOINT COMPARTMENT STREAM_NAME BUCKET
"use strict";
const crypto = require("crypto");
const common = require("oci-common");
const streaming = require("oci-streaming");
const objectstorage = require("oci-objectstorage");

const [configFile, endpoint, compartmentId, streamName, bucketName] = process.argv.slice(2);
const say = (step, fields) => console.log(JSON.stringify({ step, ...fields }));
const sha = (buffer) => crypto.createHash("sha256").update(buffer).digest("hex");
const b64 = (buffer) => Buffer.from(buffer).toString("base64");

async function refused(step, call) {
  try {
    await call();
    say(step, { status: 200 });
  } catch (e) {
    say(step, { status: e.statusCode, code: e.serviceCode, requestId: e.opcRequestId || null });
  }
}

async function main() {
  const provider = new common.ConfigFileAuthenticationDetailsProvider(configFile, "DEFAULT");
  const admin = new streaming.StreamAdminClient({ authenticationDetailsProvider: provider });
  const client = new streaming.StreamClient({ authenticationDetailsProvider: provider });
  const objects = new objectstorage.ObjectStorageClient({ authenticationDetailsProvider: provider });
  for (const c of [admin, client, objects]) c.endpoint = endpoint;

  const listed = await admin.listStreams({ compartmentId, name: streamName });
  const streamId = listed.items[0].id;
  say("listStreams", { streamId, state: listed.items[0].lifecycleState });

  // a 256-byte key, a 512 KiB binary value, and a key and value that are not ASCII
  const big = crypto.randomBytes(512 * 1024);
  const sent = [
    { key: Buffer.alloc(256, 0x6b), value: big },
    { key: Buffer.from("clé-ü"), value: Buffer.from("héllo ✓") },
    { key: null, value: Buffer.from([0, 255, 1, 254]) },
  ];
  const put = await client.putMessages({
    streamId,
    putMessagesDetails: { messages: sent.map((m) => ({ key: m.key && b64(m.key), value: b64(m.value) })) },
  });
  say("putMessages", { failures: put.putMessagesResult.failures, entries: put.putMessagesResult.entries });

  const cursor = await client.createGroupCursor({
    streamId,
    createGroupCursorDetails: {
      groupName: "ts-consumers",
      instanceName: "ts-1",
      type: streaming.models.CreateGroupCursorDetails.Type.TrimHorizon,
      commitOnGet: false,
      timeoutInMs: 30000,
    },
  });
  const got = [];
  let next = cursor.cursor.value;
  for (let i = 0; i < 20 && got.length < sent.length; i++) {
    const answer = await client.getMessages({ streamId, cursor: next, limit: 10 });
    got.push(...answer.items);
    next = answer.opcNextCursor;
  }
  say("getMessages", {
    read: got.map((m) => ({ partition: m.partition, offset: m.offset, key: m.key && sha(Buffer.from(m.key, "base64")), value: sha(Buffer.from(m.value, "base64")) })),
    sent: sent.map((m) => ({ key: m.key && sha(m.key), value: sha(m.value) })),
  });
  const beat = await client.consumerHeartbeat({ streamId, cursor: next });
  say("consumerHeartbeat", { cursor: typeof beat.cursor.value });
  await client.consumerCommit({ streamId, cursor: next });
  const group = await client.getGroup({ streamId, groupName: "ts-consumers" });
  say("getGroup", { reservations: group.group.reservations.map((r) => ({ partition: r.partition, committedOffset: r.committedOffset, reservedInstance: r.reservedInstance })) });

  const first = put.putMessagesResult.entries[0];
  const at = await client.createCursor({
    streamId,
    createCursorDetails: { partition: first.partition, type: streaming.models.CreateCursorDetails.Type.AtOffset, offset: first.offset },
  });
  const one = await client.getMessages({ streamId, cursor: at.cursor.value, limit: 1 });
  say("createCursor", { value: sha(Buffer.from(one.items[0].value, "base64")) });

  await refused("getStream unknown", () => admin.getStream({ streamId: streamId.replace(/.$/, (c) => (c === "0" ? "1" : "0")) }));
  await refused("putMessages too large", () =>
    client.putMessages({ streamId, putMessagesDetails: { messages: [{ value: b64(crypto.randomBytes(1024 * 1024 + 1)) }] } }));

  const namespaceName = (await objects.getNamespace({})).value;
  const body = Buffer.from("audit line ✓\n");
  await objects.putObject({ namespaceName, bucketName, objectName: "ts/one.txt", putObjectBody: body, contentLength: body.length, ifNoneMatch: "*" });
  const back = await objects.getObject({ namespaceName, bucketName, objectName: "ts/one.txt" });
  const chunks = [];
  for await (const chunk of back.value) chunks.push(Buffer.from(chunk));
  const listedObjects = await objects.listObjects({ namespaceName, bucketName, prefix: "ts/" });
  say("objects", { namespaceName, read: Buffer.concat(chunks).toString(), names: listedObjects.listObjects.objects.map((o) => o.name) });
  await refused("putObject again", () =>
    objects.putObject({ namespaceName, bucketName, objectName: "ts/one.txt", putObjectBody: body, contentLength: body.length, ifNoneMatch: "*" }));
}

main().catch((e) => {
  console.error(`FAILED: ${e.statusCode || ""} ${e.serviceCode || ""} ${e.message}`);
  process.exit(1);
});
