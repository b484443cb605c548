// AWS's JavaScript SDK v3 S3 client, path-style against ENDPOINT, through the proxy in HTTPS_PROXY
// (when set) with https-proxy-agent, since the SDK does not read HTTPS_PROXY by itself. Credentials
// come from the SDK's default chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN),
// the region from AWS_REGION, trust from AWS_CA_BUNDLE or SSL_CERT_FILE (when set).
//
// usage: node aws_s3.mjs ENDPOINT BUCKET
// Lists buckets, puts and gets js.txt, then a 6 MiB js-big.bin, printing "js buckets: ...",
// "js get: ...", "js big intact" and which x-amz-content-sha256 each call sent.
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import { GetObjectCommand, ListBucketsCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { HttpsProxyAgent } from 'https-proxy-agent';

const [endpoint, bucket] = process.argv.slice(2);
const caFile = process.env.AWS_CA_BUNDLE || process.env.SSL_CERT_FILE;
const ca = caFile ? fs.readFileSync(caFile) : undefined;
let httpsAgent;
if (process.env.HTTPS_PROXY) {
  httpsAgent = new HttpsProxyAgent(process.env.HTTPS_PROXY, { ca });
  // Its constructor's TLS options reach only the proxy connection; the tunnelled one to the
  // endpoint takes the agent's `options`, which Node merges into every request's.
  httpsAgent.options.ca = ca;
} else {
  httpsAgent = new https.Agent({ ca });
}
const s3 = new S3Client({
  endpoint,
  forcePathStyle: true,
  region: process.env.AWS_REGION || 'eu-west-1',
  requestHandler: new NodeHttpHandler({ httpsAgent }),
});
// The deserialize step runs after signing, so this sees the headers as sent.
const sent = [];
s3.middlewareStack.add(
  (next, context) => async (args) => {
    sent.push(`${context.commandName.replace(/Command$/, '')}=${args.request.headers['x-amz-content-sha256']}`);
    return next(args);
  },
  { step: 'deserialize', name: 'recordContentSha256' },
);

const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');
try {
  const { Buckets = [] } = await s3.send(new ListBucketsCommand({}));
  console.log(`js buckets: ${Buckets.map((b) => b.Name).join(',')}`);

  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'js.txt', Body: 'hello from js\n' }));
  const small = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'js.txt' }));
  console.log(`js get: ${(await small.Body.transformToString()).trim()}`);

  const big = crypto.randomBytes(6 * 1024 * 1024);
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'js-big.bin', Body: big }));
  const back = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'js-big.bin' }));
  const got = await back.Body.transformToByteArray();
  if (sha256(got) !== sha256(big)) {
    throw Object.assign(new Error(`js-big.bin came back as ${got.length} bytes that differ`), { name: 'Corrupt' });
  }
  console.log('js big intact');
  console.log(`js x-amz-content-sha256: ${sent.join(' ')}`);
} catch (e) {
  console.error(`js failed: ${e.name}: ${e.message}`);
  process.exitCode = 1;
}
