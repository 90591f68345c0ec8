// Lists and downloads the artifacts of the current (act) run with the
// official @actions/artifact client and prints, as JSON, every artifact
// with the files it unzipped to: {"artifacts":[{"name","id","size","files":{path: content}}]}.
// Needs ACTIONS_RUNTIME_TOKEN and ACTIONS_RESULTS_URL (act's artifact server).
// Usage: node artifact-check.mjs OUTDIR RESULT.json (the toolkit logs to stdout)
import { DefaultArtifactClient } from '@actions/artifact';
import fs from 'node:fs';
import path from 'node:path';

const out = process.argv[2];
const client = new DefaultArtifactClient();
const { artifacts } = await client.listArtifacts();
const result = [];
for (const a of artifacts) {
  const dir = path.join(out, a.name);
  await client.downloadArtifact(a.id, { path: dir });
  const files = {};
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else files[path.relative(dir, p)] = fs.readFileSync(p, 'utf8');
    }
  };
  walk(dir);
  result.push({ name: a.name, id: a.id, size: a.size, files });
}
fs.writeFileSync(process.argv[3], JSON.stringify({ artifacts: result }, null, 1) + '\n');
