// prisma-client-py 0.11's query engine, served by Prisma's WebAssembly query
// engine and its Postgres driver adapter (npm), for machines that cannot fetch
// Prisma's native engine. prisma-client-py starts this program as its engine
// binary: `--version`, or `-p PORT` with the schema at $PRISMA_DML_PATH. It
// speaks the native engine's HTTP API with prisma-client-py's GraphQL-shaped
// queries, and turns them into the JSON protocol the wasm engine takes.
// Usage: node prisma_engine.mjs --node-modules DIR (--version | -p PORT ...)
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const ENGINE_COMMIT = '393aa359c9ad4a4bb28630fb5613f9c281cde053';
const argv = process.argv.slice(2);
const option = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);

if (argv.includes('--version')) {
  process.stdout.write(`query-engine ${ENGINE_COMMIT}\n`);
  process.exit(0);
}

const modules = option('--node-modules');
const require = createRequire(path.join(modules, 'noop.js'));
const pg = require('pg');
const { PrismaPg } = require('@prisma/adapter-pg');
const { bindAdapter } = require('@prisma/driver-adapter-utils');

// Column types adapter-pg 5.17 maps; it refuses any other built-in type
// (`name`, `regclass`, ... in catalog queries): those reach the engine as text.
const MAPPED_OIDS = new Set([
  16, 17, 20, 21, 23, 25, 26, 114, 142, 650, 700, 701, 790, 869, 1042, 1043, 1082, 1083, 1114, 1184, 1266, 1560,
  1562, 1700, 2950, 3802, 143, 199, 651, 791, 1000, 1001, 1002, 1005, 1007, 1009, 1014, 1015, 1016, 1021, 1022,
  1028, 1041, 1115, 1182, 1183, 1231, 1561, 1563, 2951, 3807,
]);
const Result = require('pg/lib/result');
const addFields = Result.prototype.addFields;
Result.prototype.addFields = function (fields) {
  addFields.call(this, fields); // picks each column's parser first: unknown types parse as strings
  for (const field of this.fields) {
    if (field.dataTypeID < 10000 && !MAPPED_OIDS.has(field.dataTypeID)) field.dataTypeID = 25;
  }
};

// --- the schema: models, their fields' types, the datasource's URL variable
function readSchema(text) {
  const models = new Map();
  for (const block of text.matchAll(/^model\s+(\w+)\s*\{([\s\S]*?)^\}/gm)) {
    const fields = new Map();
    for (const line of block[2].split('\n')) {
      const field = /^\s*(\w+)\s+(\w+)/.exec(line);
      if (field) fields.set(field[1], field[2]);
    }
    models.set(block[1], fields);
  }
  const urlVariable = /datasource\s+\w+\s*\{[^}]*url\s*=\s*env\("(\w+)"\)/.exec(text);
  return { models, urlVariable: urlVariable ? urlVariable[1] : 'DATABASE_URL' };
}

// --- prisma-client-py's queries: GraphQL syntax, every value a JSON literal
function tokenize(text) {
  const tokens = [];
  const pattern = /\s+|,|([{}()[\]:])|("(?:[^"\\]|\\.)*")|(-?\d[\d.eE+-]*)|([A-Za-z_]\w*)/y;
  while (pattern.lastIndex < text.length) {
    const at = pattern.lastIndex;
    const m = pattern.exec(text);
    if (!m) throw new Error(`cannot read the query at offset ${at}`);
    if (m[1]) tokens.push({ punct: m[1] });
    else if (m[2]) tokens.push({ value: JSON.parse(m[2]) });
    else if (m[3]) tokens.push({ value: Number(m[3]) });
    else if (m[4]) tokens.push({ name: m[4] });
  }
  return tokens;
}

function parseQuery(text) {
  const tokens = tokenize(text);
  let i = 0;
  const peek = (p) => tokens[i] && tokens[i].punct === p;
  const expect = (p) => {
    if (!peek(p)) throw new Error(`expected "${p}" at token ${i}`);
    i += 1;
  };
  const name = () => {
    const t = tokens[i++];
    if (!t || t.name === undefined) throw new Error(`expected a name at token ${i - 1}`);
    return t.name;
  };
  const value = () => {
    if (peek('{')) return object('{', '}');
    if (peek('[')) {
      expect('[');
      const list = [];
      while (!peek(']')) list.push(value());
      expect(']');
      return list;
    }
    const t = tokens[i++];
    if (t.name === undefined) return t.value;
    const literals = { true: true, false: false, null: null };
    return t.name in literals ? literals[t.name] : t.name; // else an enum value
  };
  const object = (open, close) => {
    expect(open);
    const fields = {};
    while (!peek(close)) {
      const key = name();
      expect(':');
      fields[key] = value();
    }
    expect(close);
    return fields;
  };
  const selection = () => {
    expect('{');
    const fields = {};
    while (!peek('}')) {
      const key = name();
      const args = peek('(') ? object('(', ')') : undefined;
      const nested = peek('{') ? selection() : undefined;
      fields[key] = args || nested ? { arguments: args ?? {}, selection: nested ?? { $scalars: true } } : true;
    }
    expect('}');
    return fields;
  };
  name(); // query | mutation
  expect('{');
  expect(name() === 'result' ? ':' : '{'); // the `result:` alias
  const operation = name();
  const args = peek('(') ? object('(', ')') : {};
  const fields = peek('{') ? selection() : {};
  expect('}');
  return { operation, args, fields };
}

const ACTION = /^(findUnique|findFirst|findMany|createOne|createMany|updateOne|updateMany|deleteOne|deleteMany|upsertOne|aggregate|groupBy)(\w+)$/;
const TAGGED = new Set(['Json', 'DateTime', 'Decimal', 'Bytes', 'BigInt']);
const UNTYPED_KEYS = new Set(['orderBy', 'by', 'distinct', 'take', 'skip']);

function toJsonProtocol(text, schema) {
  const { operation, args, fields } = parseQuery(text);
  if (operation === 'queryRaw' || operation === 'executeRaw') {
    return { action: operation, query: { arguments: args, selection: {} } };
  }
  const m = ACTION.exec(operation);
  if (!m) throw new Error(`unknown operation ${operation}`);
  let [, action, modelName] = m;
  if (modelName.endsWith('OrThrow') && !schema.models.has(modelName)) {
    modelName = modelName.slice(0, -'OrThrow'.length);
    action += 'OrThrow';
  }
  return { modelName, action, query: { arguments: tagValues(args, modelName, schema), selection: fields } };
}

// The JSON protocol wants typed values tagged ({"$type": "Json", "value": ...}):
// prisma-client-py sends them as strings, so the schema says which are typed.
function tagValues(value, modelName, schema) {
  if (Array.isArray(value)) return value.map((v) => tagValues(v, modelName, schema));
  if (value === null || typeof value !== 'object') return value;
  const fields = schema.models.get(modelName) ?? new Map();
  const out = {};
  for (const [key, v] of Object.entries(value)) {
    const type = fields.get(key);
    if (UNTYPED_KEYS.has(key)) out[key] = v;
    else if (TAGGED.has(type)) out[key] = tagScalar(v, type);
    else if (schema.models.has(type)) out[key] = tagValues(v, type, schema);
    else out[key] = tagValues(v, modelName, schema);
  }
  return out;
}

function tagScalar(value, type) {
  if (typeof value === 'string') return { $type: type, value };
  if (Array.isArray(value)) return value.map((v) => tagScalar(v, type));
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const [key, v] of Object.entries(value)) {
    // A Json filter's `path` and `string_contains` are not Json values.
    out[key] = type !== 'Json' || ['equals', 'not', 'set'].includes(key) ? tagScalar(v, type) : v;
  }
  return out;
}

// --- the wasm engine's answers, in the shapes prisma-client-py 0.11 reads
function untag(value) {
  if (Array.isArray(value)) return value.map(untag);
  if (value === null || typeof value !== 'object') return value;
  if ('$type' in value && 'value' in value && Object.keys(value).length === 2) return value.value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, untag(v)]));
}

function rawRows({ columns, types, rows }) {
  // A NULL is typed `null`, whatever its column's type (prisma-client-py would parse it as one).
  const typed = (type, value) => {
    if (value === null) return { prisma__type: 'null', prisma__value: null };
    if (type.endsWith('-array')) {
      return { prisma__type: 'array', prisma__value: value.map((v) => typed(type.slice(0, -6), v)) };
    }
    return { prisma__type: type, prisma__value: value };
  };
  return rows.map((row) => Object.fromEntries(columns.map((c, j) => [c, typed(types[j], row[j])])));
}

function answer(response, isRaw) {
  if (!response.data) return response;
  const result = Object.values(response.data)[0];
  return { data: { result: isRaw && result && result.columns ? rawRows(result) : untag(result) } };
}

function engineError(error) {
  const message = String(error && error.message ? error.message : error);
  return { errors: [{ error: message, user_facing_error: { is_panic: false, message } }] };
}

// --- the engine and its HTTP API
async function startEngine(schemaText, schema) {
  const wasmDir = path.join(modules, '@prisma', 'query-engine-wasm', 'postgresql');
  const bindings = await import(pathToFileURL(path.join(wasmDir, 'query_engine_bg.js')).href);
  const wasmModule = new WebAssembly.Module(fs.readFileSync(path.join(wasmDir, 'query_engine_bg.wasm')));
  const instance = new WebAssembly.Instance(wasmModule, { './query_engine_bg.js': bindings });
  bindings.__wbg_set_wasm(instance.exports);
  let url = process.env[schema.urlVariable];
  if (process.env.OVERWRITE_DATASOURCES) url = JSON.parse(process.env.OVERWRITE_DATASOURCES)[0].url;
  const pool = new pg.Pool({ connectionString: url });
  pool.on('error', (error) => process.stderr.write(`prisma engine: idle database connection lost: ${error.message}\n`));
  const adapter = bindAdapter(new PrismaPg(pool));
  const log = (line) => {
    const event = JSON.parse(line);
    if (event.level === 'ERROR' || event.level === 'error') process.stderr.write(`${line}\n`);
  };
  const engine = new bindings.QueryEngine({ datamodel: schemaText, logLevel: 'error', logQueries: false }, log, adapter);
  await engine.connect('{}');
  return { engine, pool };
}

async function handle(engine, schema, method, url, headers, body) {
  if (method === 'GET' && url === '/status') return { status: 'ok' };
  if (method === 'GET' && url.startsWith('/metrics')) return {};
  const tx = /^\/transaction\/([^/]+)\/(commit|rollback)$/.exec(url);
  if (tx) {
    const done = tx[2] === 'commit' ? engine.commitTransaction(tx[1], '{}') : engine.rollbackTransaction(tx[1], '{}');
    const response = JSON.parse((await done) || '{}');
    return response.error_code ? { errors: [{ error: response.message, user_facing_error: response }] } : {};
  }
  const request = JSON.parse(body || '{}');
  if (url === '/transaction/start') {
    const response = JSON.parse(await engine.startTransaction(JSON.stringify(request), '{}'));
    return response.id ? response : { errors: [{ error: response.message, user_facing_error: response }] };
  }
  const txId = headers['x-transaction-id'];
  if (request.batch) {
    const batch = request.batch.map((q) => toJsonProtocol(q.query, schema));
    const body = { batch, ...(request.transaction ? { transaction: {} } : {}) };
    const response = JSON.parse(await engine.query(JSON.stringify(body), '{}', txId));
    if (!response.batchResult) return response;
    return { batchResult: response.batchResult.map((r, j) => answer(r, batch[j].modelName === undefined)) };
  }
  const query = toJsonProtocol(request.query, schema);
  const response = JSON.parse(await engine.query(JSON.stringify(query), '{}', txId));
  return answer(response, query.modelName === undefined);
}

async function main() {
  const schemaText = fs.readFileSync(process.env.PRISMA_DML_PATH, 'utf8');
  const schema = readSchema(schemaText);
  const { engine, pool } = await startEngine(schemaText, schema);
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      handle(engine, schema, req.method, req.url, req.headers, Buffer.concat(chunks).toString('utf8'))
        .catch(engineError)
        .then((payload) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(payload));
        });
    });
  });
  server.listen(Number(option('-p')), '127.0.0.1');
  const stop = () => {
    server.close();
    engine
      .disconnect('{}')
      .catch(() => {})
      .then(() => pool.end())
      .finally(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error) => {
  process.stderr.write(`perfkit's prisma engine could not start: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
