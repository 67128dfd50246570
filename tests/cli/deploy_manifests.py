"""deploy_manifests.py: checks train/deploy/ (called by deploy_manifests.sh with the repo root).

Parses every YAML manifest and asserts what README.md promises: one image everywhere, the same
gpt-train command with init_from=auto in every workload, out_dir and the data on the shared
volume's mount (in a bucket for bucket-job.yaml and TensorStack's PyTorchTrainingJobs, with and
without torchrun), the launcher variables each manifest must set, GPT_DIST_TOKEN from the Secret
gptkit-dist-token, and the Dockerfile's stages, runtime libraries and ENTRYPOINT. Prints one line per file; a failed check exits 1 naming it.
Writes the workloads' common gpt-train argv, one word a line, to the file given as argv[2].
"""
import json
import os
import re
import sys

import yaml

TOP = sys.argv[1]
DEPLOY = os.path.join(TOP, "train", "deploy")
PVC = "gptkit-shared"
failed = False


def check(cond, what):
    global failed
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        failed = True
    return cond


def walk(node):
    """Every dict in a parsed document, depth first."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


def env_of(c):
    return {e["name"]: e for e in c.get("env", [])}


def workload(name, docs):
    """The checks every workload shares; returns (its gpt-train containers, argv)."""
    conts = [d for doc in docs for d in walk(doc) if "image" in d]
    check(conts, f"{name}: no container")
    argvs = {tuple(c.get("command", []) + c.get("args", [])) for c in conts}
    check(len(argvs) == 1, f"{name}: its containers run different commands")
    argv = list(argvs.pop()) if argvs else []
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    check(argv[:3] == ["gpt-train", "-c", "gpt2.conf"], f"{name}: runs {argv[:3]}, not gpt-train -c gpt2.conf")
    check(opts.get("init_from") == "auto", f"{name}: no --init_from=auto")
    claims = {d["name"]: d["persistentVolumeClaim"]["claimName"]
              for doc in docs for d in walk(doc) if "persistentVolumeClaim" in d}
    mounts = [m for doc in docs for d in walk(doc) for m in d.get("volumeMounts", [])]
    shared = [m["mountPath"] for m in mounts if claims.get(m["name"]) == PVC]
    check(shared, f"{name}: does not mount the PVC {PVC}")
    for key in ("out_dir", "train_data", "val_data"):
        path = opts.get(key, "")
        check(any(path.startswith(p.rstrip("/") + "/") for p in shared),
              f"{name}: {key} = '{path}' is not on the shared volume ({shared})")
    for c in conts:
        ref = env_of(c).get("GPT_DIST_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
        check(ref.get("name") == "gptkit-dist-token" and ref.get("key") == "token",
              f"{name}: GPT_DIST_TOKEN does not come from the Secret gptkit-dist-token (key token)")
    gpus = [d["limits"]["nvidia.com/gpu"] for doc in docs for d in walk(doc)
            if "nvidia.com/gpu" in d.get("limits", {})]
    check(gpus, f"{name}: no nvidia.com/gpu limit")
    return conts, argv, opts, gpus


def load(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def by_kind(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    check(len(found) == 1, f"no single {kind}")
    return found[0] if found else {}


def pytorchjob(docs, conts, gpus):
    job = by_kind(docs, "PyTorchJob")
    check(job.get("apiVersion") == "kubeflow.org/v1", "pytorchjob.yaml: apiVersion")
    specs = job["spec"]["pytorchReplicaSpecs"]
    check(specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] >= 1,
          "pytorchjob.yaml: needs 1 Master and Workers")
    for r in specs.values():
        check(r["restartPolicy"] == "OnFailure", "pytorchjob.yaml: restartPolicy")
        pod = r["template"]["spec"]
        check(pod.get("terminationGracePeriodSeconds", 30) >= 60, "pytorchjob.yaml: grace period")
        c = pod["containers"][0]
        check(c["name"] == "pytorch", "pytorchjob.yaml: the container must be named pytorch")
        check(any(p.get("name") == "pytorchjob-port" for p in c.get("ports", [])),
              "pytorchjob.yaml: no port named pytorchjob-port (MASTER_PORT)")
        check(not {"RANK", "WORLD_SIZE"} & set(env_of(c)), "pytorchjob.yaml: sets what the operator sets")
    n = specs["Master"]["replicas"] + specs["Worker"]["replicas"]
    check(set(gpus) == {1}, "pytorchjob.yaml: one GPU per pod (RANK is the pod's index)")
    return f"PyTorchJob: {n} ranks (Master 1 + Worker {n - 1}), 1 GPU each"


def trainjob(docs, conts, gpus):
    job = by_kind(docs, "TrainJob")
    check(job.get("apiVersion") == "trainer.kubeflow.org/v1alpha1", "trainjob.yaml: apiVersion")
    spec, tr = job["spec"], job["spec"]["trainer"]
    check(spec["runtimeRef"]["name"] == "torch-distributed", "trainjob.yaml: runtime")
    check(tr["numProcPerNode"] == tr["resourcesPerNode"]["limits"]["nvidia.com/gpu"],
          "trainjob.yaml: numProcPerNode must be the GPUs per node")
    over = spec["podTemplateOverrides"][0]
    check({"name": "node"} in over["targetJobs"], "trainjob.yaml: overrides do not target node")
    check(over["spec"]["containers"][0]["name"] == "node", "trainjob.yaml: the container is node")
    return (f"TrainJob on torch-distributed: {tr['numNodes']} nodes x {tr['numProcPerNode']} "
            f"local ranks (PET_NPROC_PER_NODE), {gpus[0]} GPUs each")


def elasticjob(docs, conts, gpus):
    job = by_kind(docs, "ElasticJob")
    check(job.get("apiVersion") == "elastic.iml.github.io/v1alpha1", "elasticjob.yaml: apiVersion")
    check(job["spec"]["distributionStrategy"] == "AllreduceStrategy", "elasticjob.yaml: strategy")
    w = job["spec"]["replicaSpecs"]["worker"]
    c = w["template"]["spec"]["containers"][0]
    check(c["name"] == "main", "elasticjob.yaml: DLRover's main container must be named main")
    env = env_of(c)
    addr = f"{job['metadata']['name']}-edljob-worker-0"
    check(env["MASTER_ADDR"]["value"] == addr, f"elasticjob.yaml: MASTER_ADDR is not {addr}")
    check(env["MASTER_PORT"]["value"] == "3333", "elasticjob.yaml: MASTER_PORT is not 3333")
    check(set(gpus) == {1}, "elasticjob.yaml: one GPU per pod")
    return f"ElasticJob (AllreduceStrategy): {w['replicas']} workers, MASTER_ADDR {addr}:3333"


def indexed_job(docs, conts, gpus):
    svc, job = by_kind(docs, "Service"), by_kind(docs, "Job")
    check(job.get("apiVersion") == "batch/v1" and svc.get("apiVersion") == "v1", "indexed-job.yaml: apiVersion")
    js, pod = job["spec"], job["spec"]["template"]["spec"]
    sname, jname = svc["metadata"]["name"], job["metadata"]["name"]
    check(svc["spec"]["clusterIP"] == "None", "indexed-job.yaml: the Service is not headless")
    check(svc["spec"]["selector"] == {"job-name": jname}, "indexed-job.yaml: the Service selects other pods")
    check(js["completionMode"] == "Indexed", "indexed-job.yaml: not Indexed")
    check(pod["subdomain"] == sname, "indexed-job.yaml: subdomain is not the Service")
    check(pod["restartPolicy"] == "OnFailure", "indexed-job.yaml: restartPolicy")
    env = env_of(conts[0])
    rank = env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    check(rank == "metadata.annotations['batch.kubernetes.io/job-completion-index']",
          "indexed-job.yaml: RANK is not the completion index")
    n = int(env["WORLD_SIZE"]["value"])
    check(js["completions"] == js["parallelism"] == n, "indexed-job.yaml: WORLD_SIZE != completions")
    addr, port = f"{jname}-0.{sname}", env["MASTER_PORT"]["value"]
    check(env["MASTER_ADDR"]["value"] == addr, f"indexed-job.yaml: MASTER_ADDR is not {addr}")
    check(port.isdigit(), "indexed-job.yaml: MASTER_PORT")
    check(set(gpus) == {1}, "indexed-job.yaml: one GPU per pod")
    return f"Job (Indexed) + headless Service: {n} ranks, MASTER_ADDR {addr}:{port}"


def bucket_job(image):
    """bucket-job.yaml: the same image, data and out_dir in a bucket, credentials from a Secret,
    no shared volume, TMPDIR on a scratch volume, --nproc_per_node = the pod's GPUs."""
    docs = load("bucket-job.yaml")
    job = by_kind(docs, "Job")
    pod = job["spec"]["template"]["spec"]
    check(pod["restartPolicy"] == "OnFailure", "bucket-job.yaml: restartPolicy")
    c = pod["containers"][0]
    argv, opts, env, secret = bucket_container("bucket-job.yaml", c, image)
    check(not any("persistentVolumeClaim" in d for doc in docs for d in walk(doc)),
          "bucket-job.yaml: mounts a volume claim")
    scratch_tmpdir("bucket-job.yaml", pod, c, env)
    gpus = c["resources"]["limits"]["nvidia.com/gpu"]
    check(str(gpus) == opts.get("nproc_per_node"), "bucket-job.yaml: nproc_per_node is not the GPUs")
    return (f"bucket-job.yaml: Job of 1 pod x {gpus} GPUs, data and out_dir {opts.get('out_dir')} in a "
            f"bucket, credentials from the Secret {secret}, TMPDIR on a scratch volume")


def bucket_container(name, c, image):
    """What every manifest that trains from a bucket shares: the image, gpt-train -c gpt2.conf
    --init_from=auto (after torchrun's options when argv starts with gpt-train), data and out_dir
    in a bucket, the AWS credentials from one Secret, TMPDIR on a scratch volume. Returns
    (argv, opts, env, Secret name)."""
    check(c["image"] == image, f"{name}: image {c['image']}, not {image}")
    argv = c.get("command", []) + c.get("args", [])
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    check(argv[:3] == ["gpt-train", "-c", "gpt2.conf"] and opts.get("init_from") == "auto",
          f"{name}: not gpt-train -c gpt2.conf --init_from=auto")
    for key in ("out_dir", "train_data", "val_data"):
        check(opts.get(key, "").startswith("s3://"), f"{name}: {key} is not in a bucket")
    env = env_of(c)
    refs = {n: env.get(n, {}).get("valueFrom", {}).get("secretKeyRef", {})
            for n in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    secrets = {r.get("name") for r in refs.values()}
    check(all(r.get("key") == n for n, r in refs.items()) and len(secrets) == 1 and None not in secrets,
          f"{name}: the AWS credentials do not come from one Secret")
    return argv, opts, env, secrets.pop() if len(secrets) == 1 else None


def scratch_tmpdir(name, pod, c, env):
    scratch = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
    tmp = env.get("TMPDIR", {}).get("value", "")
    check(any(m["name"] in scratch and m["mountPath"] == tmp for m in c.get("volumeMounts", [])),
          f"{name}: TMPDIR is not on a scratch volume")


def block_size():
    with open(os.path.join(TOP, "train", "configs", "gpt2.conf")) as f:
        return int(re.search(r"^block_size\s*=\s*(\d+)", f.read(), re.M).group(1))


def tensorstack(name, image):
    """A TensorStack PyTorchTrainingJob training from a bucket: one worker replica spec,
    OnFailure, the job's token and the AWS credentials from Secrets, no volume claim. Without
    torchrun: gpt-train is the command, one GPU a replica, RANK and WORLD_SIZE left to the
    controller. With torchrun: torchrunConfig enabled with --no-python and the c10d rendezvous,
    args starting with gpt-train, elastic between minReplicas and maxReplicas with
    total_batch_size splitting over every world size in between, one rank per GPU, and
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (MASTER_PORT a free port, not torchrun's store)."""
    docs = load(name)
    job = by_kind(docs, "PyTorchTrainingJob")
    check(job.get("apiVersion") == "batch.tensorstack.dev/v1beta1", f"{name}: apiVersion")
    spec = job["spec"]
    check(len(spec["replicaSpecs"]) == 1 and spec["replicaSpecs"][0]["type"] == "worker",
          f"{name}: not one worker replica spec")
    rs = spec["replicaSpecs"][0]
    check(rs["restartPolicy"] == "OnFailure", f"{name}: restartPolicy")
    pod = rs["template"]["spec"]
    check(pod.get("terminationGracePeriodSeconds", 30) >= 60, f"{name}: grace period")
    check(not any("persistentVolumeClaim" in d for doc in docs for d in walk(doc)), f"{name}: mounts a volume claim")
    c = pod["containers"][0]
    argv, opts, env, secret = bucket_container(name, c, image)
    scratch_tmpdir(name, pod, c, env)
    ref = env.get("GPT_DIST_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
    check(ref.get("name") == "gptkit-dist-token" and ref.get("key") == "token",
          f"{name}: GPT_DIST_TOKEN does not come from the Secret gptkit-dist-token (key token)")
    check(not {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} & set(env), f"{name}: sets what the launcher sets")
    gpus = int(c["resources"]["limits"]["nvidia.com/gpu"])
    tr = spec.get("torchrunConfig", {})
    if not tr.get("enabled"):
        check(c.get("command") == ["gpt-train"], f"{name}: the command is not gpt-train")
        check(gpus == 1, f"{name}: one GPU a replica (RANK is the replica's)")
        return (f"{name}: PyTorchTrainingJob, {rs['replicas']} worker replicas x 1 GPU, data and out_dir "
                f"{opts.get('out_dir')} in a bucket, credentials from the Secret {secret}")
    check("command" not in c and c["args"][0] == "gpt-train", f"{name}: args must start with gpt-train (torchrun runs them)")
    check("--no-python" in tr.get("extraOptions", []), f"{name}: torchrun without --no-python runs gpt-train with python")
    check(tr.get("rdzvBackend") == "c10d", f"{name}: rdzvBackend is not c10d")
    check(tr.get("procPerNode") in ("gpu", str(gpus)), f"{name}: procPerNode is not one rank per GPU")
    check(env.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", {}).get("value") == "1",
          f"{name}: without TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 MASTER_PORT is torchrun's own store")
    el = spec.get("elastic", {})
    lo, hi = el.get("minReplicas", 0), el.get("maxReplicas", 0)
    check(el.get("enabled") and 1 <= lo < hi and lo <= rs["replicas"] <= hi, f"{name}: not elastic (minReplicas < maxReplicas)")
    tokens = int(opts.get("batch_size", 0)) * block_size()
    for nodes in range(lo, hi + 1):
        check(tokens and int(opts.get("total_batch_size", 0)) % (tokens * nodes * gpus) == 0,
              f"{name}: total_batch_size does not split over {nodes} nodes x {gpus} GPUs")
    return (f"{name}: PyTorchTrainingJob under torchrun (--no-python, c10d), elastic {lo} to {hi} "
            f"replicas x {gpus} GPUs, data and out_dir {opts.get('out_dir')} in a bucket, credentials "
            f"from the Secret {secret}")


# Makefile PKGS (pkg-config modules) and Gloo -> the runtime package the image must install.
RUNTIME = {"libpcre2-8": "libpcre2-8-0", "libarchive": "libarchive13", "jansson": "libjansson4",
           "zlib": "zlib1g", "openblas": "libopenblas0", "libcurl": "libcurl4", "libcrypto": "libssl3",
           "libzstd": "libzstd1", "snappy": "libsnappy1v5", "liblz4": "liblz4-1", "gloo": "libgloo0"}


def dockerfile():
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        lines = re.sub(r"\\\n", " ", f.read()).splitlines()
    ins = [l.split(None, 1) for l in lines if l.strip() and not l.lstrip().startswith("#")]
    froms = [a for k, a in ins if k == "FROM"]
    runs = " ".join(a for k, a in ins if k == "RUN")
    args = dict(a.split("=", 1) for k, a in ins if k == "ARG" and "=" in a)
    check(len(froms) == 2 and "-devel-" in froms[0] and "-runtime-" in froms[1]
          and all(f.startswith("nvidia/cuda:") for f in froms), "Dockerfile: not CUDA devel -> runtime")
    check(args.get("CUDA_VERSION", "").startswith("12.") and args.get("UBUNTU") in
          ("ubuntu22.04", "ubuntu24.04"), "Dockerfile: CUDA 12.x on Ubuntu 22.04/24.04")
    check("bash .ci/deps.sh" in runs and "make install" in runs and "PREFIX=/usr/local" in runs,
          "Dockerfile: does not build with .ci/deps.sh and make install PREFIX=/usr/local")
    entry = [json.loads(a) for k, a in ins if k == "ENTRYPOINT"]
    check(entry and entry[-1] == ["gpt-train"], f"Dockerfile: ENTRYPOINT is {entry}")
    with open(os.path.join(TOP, "Makefile")) as f:
        mk = f.read()
    mods = re.search(r"^PKGS\s*:=(.*)$", mk, re.M).group(1).split() + ["gloo"]
    stage2 = re.findall(r"\b(lib\S+|zlib1g)\b", runs[runs.rfind("apt-get install"):])
    for m in mods:
        want = RUNTIME.get(m)
        check(want and any(p.startswith(want) for p in stage2),
              f"Dockerfile: the runtime stage lacks {want or m} (Makefile links {m})")
    return f"Dockerfile: {froms[0].split(':')[0]} devel -> runtime, ENTRYPOINT {json.dumps(entry[-1])}"


def readme(image, env_names):
    with open(os.path.join(DEPLOY, "README.md")) as f:
        text = f.read()
    names = sorted(n for n in os.listdir(DEPLOY) if n != "README.md" and not n.endswith(".dockerignore"))
    words = ([image] + names + sorted(env_names) +
             ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
              "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "--nproc_per_node",
              "NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE=1", "GLOO_SOCKET_IFNAME",
              "emulator only", "kubectl create secret generic gptkit-dist-token"])
    for w in words:
        check(w in text, f"README.md does not mention {w}")
    return "README.md: names the image, every file, the variables and the NCCL knobs"


def main():
    kinds = {"pytorchjob.yaml": pytorchjob, "trainjob.yaml": trainjob,
             "elasticjob.yaml": elasticjob, "indexed-job.yaml": indexed_job}
    yamls = sorted(n for n in os.listdir(DEPLOY) if n.endswith(".yaml"))
    bucket = {"bucket-job.yaml", "pytorchtrainingjob.yaml", "pytorchtrainingjob-torchrun.yaml"}
    check(set(kinds) | {"pvc.yaml"} | bucket == set(yamls), f"train/deploy has {yamls}")
    pvc = by_kind(load("pvc.yaml"), "PersistentVolumeClaim")
    check(pvc["metadata"]["name"] == PVC and pvc["spec"]["accessModes"] == ["ReadWriteMany"],
          f"pvc.yaml: not a ReadWriteMany claim named {PVC}")
    print(f"pvc.yaml: PersistentVolumeClaim {PVC}, ReadWriteMany")
    images, argvs, env_names, out_dirs = set(), set(), set(), set()
    for name in yamls:
        if name == "pvc.yaml" or name in bucket:
            continue
        docs = load(name)
        conts, argv, opts, gpus = workload(name, docs)
        images |= {c["image"] for c in conts}
        argvs.add(tuple(argv))
        out_dirs.add(opts.get("out_dir"))
        env_names |= {e for c in conts for e in env_of(c)}
        print(f"{name}: {kinds[name](docs, conts, gpus)}" if name in kinds else name)
    check(len(images) == 1, f"the manifests name several images: {sorted(images)}")
    check(len(argvs) == 1, "the manifests run different gpt-train commands")
    image = images.pop() if images else ""
    print(f"every workload: image {image}, {' '.join(next(iter(argvs))[:4])}, "
          f"out_dir {out_dirs.pop()} on {PVC}")
    print(bucket_job(image))
    for name in ("pytorchtrainingjob.yaml", "pytorchtrainingjob-torchrun.yaml"):
        print(tensorstack(name, image))
    print(dockerfile())
    print(readme(image, env_names))
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(next(iter(argvs))) + "\n")
    sys.exit(1 if failed else 0)


try:
    main()
except (KeyError, IndexError, TypeError) as e:
    sys.exit(f"FAIL: a manifest lacks an expected field ({type(e).__name__}: {e})")
