/**
 * The provenance of one image: an in-toto Statement (https://in-toto.io/Statement/v1) whose subjects
 * are the image index and every platform's manifest, with an SLSA v1 provenance predicate
 * (https://slsa.dev/spec/v1.0/provenance) naming the commit, every input (the bases, each Debian
 * package with its version and SHA-256, each Node package with its integrity, the npm lockfile) and
 * the parameters of the build. Nothing in it varies between two builds of the same commit: no build
 * time, no random id; it is written unsigned (a release job signs it: docs/images.md).
 */
import { join } from 'node:path';
import type { BaseRecord, ImageName } from './manifest.ts';
import { fileDigest, MEDIA_TYPES } from './oci-layout.ts';
import type { Platform } from './platforms.ts';

/** What kind of build this is: `npm run images` (images/build-images.ts), as docs/reproducible-builds.md describes it. */
export const BUILD_TYPE = 'urn:secret-agent:images:build-images:v1';
/** Who ran it: no build platform of record signs here; a release job's cosign attestation says who it was. */
const BUILDER_ID = 'urn:secret-agent:images:npm-run-images';

interface ResourceDescriptor {
  readonly name?: string;
  readonly uri?: string;
  readonly digest?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, unknown>>;
}

export interface ProvenanceStatement {
  readonly _type: 'https://in-toto.io/Statement/v1';
  readonly subject: readonly ResourceDescriptor[];
  readonly predicateType: 'https://slsa.dev/provenance/v1';
  readonly predicate: {
    readonly buildDefinition: {
      readonly buildType: string;
      readonly externalParameters: Readonly<Record<string, unknown>>;
      readonly internalParameters: Readonly<Record<string, unknown>>;
      readonly resolvedDependencies: readonly ResourceDescriptor[];
    };
    readonly runDetails: {
      readonly builder: { readonly id: string; readonly version: Readonly<Record<string, string>> };
      readonly metadata: Readonly<Record<string, unknown>>;
    };
  };
}

export interface ProvenanceInput {
  readonly root: string;
  readonly name: ImageName;
  readonly version: string;
  /** The commit, `-dirty` when the worktree had changes. */
  readonly revision: string;
  /** git remote's URL, when there is one. */
  readonly repository?: string;
  readonly sourceDateEpoch: number;
  readonly dockerfile: string;
  readonly index: string;
  readonly platforms: readonly {
    readonly platform: Platform;
    readonly digest: string;
    readonly id: string;
  }[];
  readonly builder: BaseRecord;
  readonly runtimes: readonly BaseRecord[];
  /** The bases the resident was compiled on, per platform (agent only). */
  readonly natives: readonly BaseRecord[];
  readonly buildArgs: Readonly<Record<string, string>>;
  readonly engine: string;
  readonly tools: Readonly<Record<string, string>>;
}

const hex = (digest: string) => digest.replace(/^sha256:/, '');

/** npm's integrity (`sha512-<base64>`) as an in-toto digest (`{ sha512: <hex> }`). */
function integrityDigest(integrity: string): Record<string, string> {
  const [algorithm, base64] = integrity.split('-', 2);
  return { [algorithm!]: Buffer.from(base64!, 'base64').toString('hex') };
}

function baseDependencies(base: BaseRecord, role: string): ResourceDescriptor[] {
  const image: ResourceDescriptor = {
    name: base.ref,
    digest: { sha256: hex(base.digest) },
    annotations: { role, platform: base.platform, imageId: base.id, assembled: base.assembled },
  };
  if (!base.inputs) return [image];
  const debs = base.inputs.debian.map((d): ResourceDescriptor => ({
    uri: `pkg:deb/debian/${d.name}@${encodeURIComponent(d.version)}?arch=${d.architecture}`,
    digest: { sha256: d.sha256 },
    annotations: { role, platform: base.platform },
  }));
  const node: ResourceDescriptor = {
    uri: `pkg:npm/${base.inputs.node.name}@${base.inputs.node.version}`,
    digest: integrityDigest(base.inputs.node.integrity),
    annotations: { role, platform: base.platform, integrity: base.inputs.node.integrity },
  };
  return [
    image,
    ...debs,
    node,
    ...(base.inputs.npm ? [{ uri: `pkg:npm/npm@${base.inputs.npm}`, annotations: { role } }] : []),
  ];
}

export function provenanceStatement(input: ProvenanceInput): ProvenanceStatement {
  const image = `secret-agent/${input.name}:${input.version}`;
  const commit = input.revision.replace(/-dirty$/, '');
  const lockfile = hex(fileDigest(join(input.root, 'package-lock.json')));
  return {
    _type: 'https://in-toto.io/Statement/v1',
    subject: [
      { name: image, digest: { sha256: hex(input.index) }, annotations: { mediaType: MEDIA_TYPES.index } },
      ...input.platforms.map((p) => ({
        name: image,
        digest: { sha256: hex(p.digest) },
        annotations: { mediaType: MEDIA_TYPES.manifest, platform: p.platform, imageId: p.id },
      })),
    ],
    predicateType: 'https://slsa.dev/provenance/v1',
    predicate: {
      buildDefinition: {
        buildType: BUILD_TYPE,
        externalParameters: {
          source: { ...(input.repository ? { repository: input.repository } : {}), revision: input.revision },
          version: input.version,
          dockerfile: input.dockerfile,
          platforms: input.platforms.map((p) => p.platform),
          buildArgs: input.buildArgs,
        },
        internalParameters: {
          sourceDateEpoch: input.sourceDateEpoch,
          engine: input.engine,
          tools: input.tools,
        },
        resolvedDependencies: [
          {
            ...(input.repository ? { uri: `git+${input.repository}@${commit}` } : { name: 'source' }),
            digest: { gitCommit: commit },
            annotations: { dirty: input.revision.endsWith('-dirty') },
          },
          { name: 'package-lock.json', digest: { sha256: lockfile } },
          ...baseDependencies(input.builder, 'build stage'),
          ...input.runtimes.flatMap((r) => baseDependencies(r, 'runtime')),
          ...input.natives.flatMap((r) => baseDependencies(r, 'native build stage')),
        ],
      },
      runDetails: {
        builder: {
          id: BUILDER_ID,
          version: { [input.engine.split(' ')[0]!]: input.engine.split(' ')[1] ?? '', ...input.tools },
        },
        metadata: {},
      },
    },
  };
}
