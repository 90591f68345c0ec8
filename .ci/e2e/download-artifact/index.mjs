// STAND-IN for actions/download-artifact@v4 under act (see action.yml): the
// official action's selection and layout (name → path; pattern or all →
// path/<artifact name>, or path with merge-multiple; latest artifact of each
// name; no match is not an error), with the official @actions/artifact client.
import { DefaultArtifactClient } from '@actions/artifact';
import * as core from '@actions/core';
import { Minimatch } from 'minimatch';
import path from 'node:path';

async function main() {
  const name = core.getInput('name');
  const pattern = core.getInput('pattern');
  const merge = core.getBooleanInput('merge-multiple');
  const ws = process.env.GITHUB_WORKSPACE || process.cwd();
  const dest = path.resolve(ws, core.getInput('path') || '.');
  const client = new DefaultArtifactClient();
  let artifacts;
  if (name) {
    if (pattern) core.warning('name and pattern given: pattern is ignored');
    const { artifact } = await client.getArtifact(name);
    artifacts = [artifact];
  } else {
    ({ artifacts } = await client.listArtifacts({ latest: true }));
    if (pattern) {
      const m = new Minimatch(pattern);
      artifacts = artifacts.filter((a) => m.match(a.name));
    }
  }
  for (const a of artifacts) {
    const to = name || merge ? dest : path.join(dest, a.name);
    await client.downloadArtifact(a.id, { path: to });
    core.info(`stand-in download-artifact: ${a.name} (id ${a.id}) → ${path.relative(ws, to) || '.'}`);
  }
  if (artifacts.length === 0) core.info(`no artifact matched ${pattern || '(all)'}`);
  core.setOutput('download-path', dest);
}

main().catch((err) => core.setFailed(err.message));
