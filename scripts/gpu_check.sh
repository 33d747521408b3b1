#!/usr/bin/env bash
# Build, CUDA tests, example and benchmarks on a GPU machine, in one command.
#
#   scripts/gpu_check.sh OUT_DIR [STAGE ...]      (default: build quick example bench sampling)
#
# Test stages:
#   - quick = the quick tier, `pytest -m "not slow"`: every CUDA kernel and code path at
#     least once (each parameter sweep thinned to a set that takes every value once, the
#     CPU cases of GPU tests left to CPU-only CI), under torch.profiler so that
#     scripts/cuda_kernels.py can list the kernels of csrc/*/cuda it launched. Fits in 5 minutes:
#     4 min with the build on one H200 (per-file times in docs/contributing.md);
#   - slow = the rest (`-m slow`); tests = everything (~20 min on one GPU).
# Benchmark stages:
#   - bench = gather; sampling = sampler; sampling_pinned = the sampler reading a graph in pinned host
#     memory; sampling_modes = weighted and temporal sampling beside uniform (PYG_ACCEL_MODES="weighted"
#     picks modes, here and in hetero_modes); sampling_papers = both on a papers100M-size topology;
#   - hetero = heterogeneous sampler on an ogbn-mag-like graph (hetero_modes: weighted and temporal);
#   - multigpu = sharded features on 2 GPUs; fullgraph = full-graph training partitioned across GPUs (tests and
#     example on 2, the benchmark on all, halo rows in fp32 and in bf16);
#     hosts = 4 GPUs declared 2 hosts x 2 (the cross-host sharded tier: tests, example, gather benchmark);
#     papers_multi = examples/multi_gpu.py at papers100M's size on every GPU (--large --bf16);
#     dp_probe = the data-parallel loop's timings with the peer gather's SM cap and the loader stream's
#     priority, 1 and 2 hosts, features sharded or replicated, and NCCL's transports and all-to-all
#     bandwidth (scripts/nccl_probe.py);
#     wholegraph = pylibwholegraph's gather beside ours (wheels in .wholegraph-wheels/);
#     scaling = the multi-process examples at 1, 2 and 4 GPUs (epoch, speed-up, efficiency, accuracy;
#     data-parallel with features sharded, then replicated; full-graph with fp32, then bf16 halo rows);
#   - sparse = SpMM/SDDMM kernels; adjoint = SpMM's backward by atomics vs over the transpose;
#     max = max aggregation's forward and backward against sum, on the products-size graph and on
#     one of a sampled batch's size (scripts/max_timing.py --paths --forms: each path timed, and min
#     and mean beside the compositions they replaced);
#     layers = GCN/SAGE/GAT layers vs PyG;
#   - e2e_step = the captured training step (TrainStep) beside the eager one, SAGE and GAT;
#     hetero_e2e = the heterogeneous example's model and loop: stock PyG tuned, ours eager and captured
#     (hetero_e2e_link: its encoder on link prediction, LinkNeighborLoader; hetero_e2e_tf32: on TF32;
#     hetero_e2e_stores: ours over pyg_accel's stores rather than the HeteroData);
#     e2e_compile = the model under torch.compile(mode='reduce-overhead'); e2e_peers = WholeGraph's and
#     gSampler's published settings; tta / tta_gat = time to stock PyG's accuracy (3 seeds; SAGE / GAT);
#   - e2e = end-to-end training epochs against stock PyG tuned (DataLoader workers) and untuned,
#     fp32 and TF32, ours trimmed and untrimmed (e2e_untrimmed: every configuration untrimmed, and
#     WholeGraph's setting; e2e_pinned: features in pinned host memory,
#     e2e_pinned_graph: the graph there too, e2e_amp: bf16 autocast); cache = pinned features
#     behind a GPU row cache;
#   - example = the examples with their defaults; example_hetero = the ogbn-mag-shaped example,
#     ours (captured step, then eager) and stock PyG tuned; example_link = the link-prediction example, captured
#     step then eager; example_papers_full = the main example at papers100M's full size.
#
# PYG_ACCEL_TESTS='tests/test_a.py tests/test_b.py' narrows the test stages;
# PYG_ACCEL_STEP_TIMEOUT=S stops any one command of a stage after S seconds (its log kept, the
# stage marked failed, the next one run), so a hung test cannot take a whole device call;
# PYG_ACCEL_FULLGRAPH_ARGS (e.g. '--orders none cluster'; default '--exchange-dtypes fp32 bf16') is passed to
# benchmarks/full_graph.py.
# Logs, JSON and plots go to OUT_DIR. The extension cache lives in .build-cache/ of the
# repo (ignored by git) so a warm machine reuses it. If .gpu-wheels/ holds torch-sparse /
# torch-scatter wheels built for the machine's torch (stock PyG's CPU sampler needs
# them, or pyg-lib), they are installed for the stock-PyG baselines and the tests that
# compare with stock PyG's loader.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-gpu-out}}
shift || true
STAGES=${*:-build quick example bench sampling}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
export PYG_ACCEL_CACHE_DIR=${PYG_ACCEL_CACHE_DIR:-$PWD/.build-cache}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -d .gpu-wheels ] && ls .gpu-wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/pyg-baseline .gpu-wheels/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/pyg-baseline
fi
status=0
run() {  # run NAME CMD...: tee the output to OUT_DIR/NAME.log, remember failures
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  if [ "${PYG_ACCEL_STEP_TIMEOUT:-0}" -gt 0 ]; then  # (timeout signals its process group: torchrun's workers too)
    timeout --kill-after=10 "$PYG_ACCEL_STEP_TIMEOUT" "$@" 2>&1 | tee "$OUT_DIR/$name.log"
  else
    "$@" 2>&1 | tee "$OUT_DIR/$name.log"
  fi
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && echo "=== $name: stopped after PYG_ACCEL_STEP_TIMEOUT=$PYG_ACCEL_STEP_TIMEOUT s"
  echo "=== $name: exit $rc after $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
for stage in $STAGES; do
  case $stage in
    build) run build python3 -m pyg_accel.build ;;
    quick)
      rm -f "$OUT_DIR/kernels.tsv"
      run quick python3 -m pytest ${PYG_ACCEL_TESTS:-tests} -m "not slow" -q -rfEs --tb=short -p no:cacheprovider \
        --durations=40 --duration-log "$OUT_DIR/quick_durations.tsv" --kernel-report "$OUT_DIR/kernels.tsv"
      run quick_kernels python3 scripts/cuda_kernels.py "$OUT_DIR/kernels.tsv" ;;
    slow) run slow python3 -m pytest ${PYG_ACCEL_TESTS:-tests} -m slow -q -rfs -p no:cacheprovider --durations=20 ;;
    tests) run tests python3 -m pytest ${PYG_ACCEL_TESTS:-tests} -q -rfs -p no:cacheprovider --durations=40 ;;
    example)
      run example python3 examples/node_classification.py --epochs 20 --out "$OUT_DIR/example"
      run example_link python3 examples/link_prediction.py --epochs 5 --out "$OUT_DIR/example_link"
      run example_papers python3 examples/node_classification.py --dataset synthetic-papers100M --scale 0.02 \
        --cache-fraction 0.2 --epochs 3 --out "$OUT_DIR/example_papers" ;;
    example_hetero)  # ogbn-mag's task on a synthetic graph of a tenth of its size: ours (captured, eager), then stock PyG's
      run example_hetero python3 examples/hetero_node_classification.py --scale 0.1 --epochs 3 \
        --out "$OUT_DIR/example_hetero"
      run example_hetero_eager python3 examples/hetero_node_classification.py --scale 0.1 --epochs 3 --eager \
        --out "$OUT_DIR/example_hetero_eager"
      run example_hetero_pyg python3 examples/hetero_node_classification.py --scale 0.1 --epochs 3 --baseline pyg \
        --out "$OUT_DIR/example_hetero_pyg" ;;
    example_link)  # the link-prediction example on its default graph: captured step, then eager
      run example_link python3 examples/link_prediction.py --epochs 3 --out "$OUT_DIR/example_link"
      run example_link_eager python3 examples/link_prediction.py --epochs 3 --eager --out "$OUT_DIR/example_link_eager" ;;
    example_papers_full)  # papers100M's size generated into the stores: graph on the GPU, 57 GB of features pinned
      run example_papers_full python3 examples/node_classification.py --dataset synthetic-papers100M --large \
        --cache-fraction 0.2 --epochs 3 --out "$OUT_DIR/example_papers_full" ;;
    bench) run bench python3 benchmarks/gather.py --out "$OUT_DIR" ;;
    sampling) run sampling python3 benchmarks/sampling.py --preset products --device cuda --out "$OUT_DIR" ;;
    sampling_pinned) run sampling_pinned python3 benchmarks/sampling.py --preset products --device cuda \
      --graph-location pinned --batch-sizes 1024 4096 --out "$OUT_DIR" ;;
    sampling_modes)  # weighted and temporal (node times, uniform and 'last') samples, against uniform ones
      for mode in ${PYG_ACCEL_MODES:-weighted temporal temporal-last}; do
        run "sampling_$mode" python3 benchmarks/sampling.py --preset products --device cuda --mode "$mode" \
          --batch-sizes 1024 4096 --baseline-batches 2 --out "$OUT_DIR"
      done ;;
    sampling_papers)  # papers100M's size (111 M nodes, 3.2 G edges, 27 GB of CSC): on the GPU, then in pinned memory
      run sampling_papers python3 benchmarks/sampling.py --preset papers100M --device cuda --batch-sizes 1024 4096 \
        --baseline-batches 2 --out "$OUT_DIR"
      run sampling_papers_pinned python3 benchmarks/sampling.py --preset papers100M --device cuda \
        --graph-location pinned --batch-sizes 1024 4096 --baseline-batches 2 --out "$OUT_DIR" ;;
    hetero) run hetero python3 benchmarks/hetero_sampling.py --out "$OUT_DIR" ;;
    hetero_modes)  # weighted and temporal (paper times, uniform and 'last') heterogeneous samples
      for mode in ${PYG_ACCEL_MODES:-weighted temporal temporal-last}; do
        run "hetero_$mode" python3 benchmarks/hetero_sampling.py --mode "$mode" --baseline-batches 2 --out "$OUT_DIR"
      done ;;
    multigpu)  # two or more GPUs: sharded features read peer-to-peer (tests, example, benchmark)
      run multigpu_tests python3 -m pytest tests/test_distributed.py tests/test_example.py -k "process or sharded" \
        -q -rs -p no:cacheprovider
      run multigpu_example python3 -m torch.distributed.run --standalone --nproc_per_node 2 examples/multi_gpu.py \
        --out "$OUT_DIR/example_multi_gpu"
      run multigpu_bench python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
        benchmarks/sharded_gather.py --out "$OUT_DIR" ;;
    hosts)  # four GPUs as 2 virtual hosts x 2: rows of the other "host" through NCCL, beside the IPC reads
      run hosts_tests python3 -m pytest tests/test_distributed.py tests/test_example.py -k "virtual_hosts or released" \
        -q -rs -p no:cacheprovider
      run hosts_example env PYG_ACCEL_RANKS_PER_HOST=2 python3 -m torch.distributed.run --standalone \
        --nproc_per_node 4 examples/multi_gpu.py --dataset synthetic-products --hidden 256 --layers 3 \
        --num-neighbors 15,10,5 --epochs 5 --tf32 --out "$OUT_DIR/example_hosts"
      run hosts_bench python3 -m torch.distributed.run --standalone --nproc_per_node 4 \
        benchmarks/sharded_gather.py --out "$OUT_DIR/hosts" ;;
    dp_probe)  # where the data-parallel step loses its overlap: loop timings (ms per batch, rank 0) with the
      # peer-reading gather capped to 1/k of the SMs (PYG_ACCEL_GATHER_PEER_SM_DIVISOR) and the loader's stream
      # at normal rather than high priority (PYG_ACCEL_PREFETCH_PRIORITY), on one host and on 2 virtual hosts;
      # then NCCL's transports and bandwidths (scripts/nccl_probe.py)
      gpus=$(nvidia-smi -L | wc -l)
      for setting in "1 0 -1 sharded" "1 0 -1 replicated" "1 4 -1 sharded" "1 0 0 sharded" "1 4 0 sharded" \
                     "2 0 -1 sharded" "2 4 -1 sharded" "2 0 0 sharded"; do
        set -- $setting
        echo "--- $1 host(s), PYG_ACCEL_GATHER_PEER_SM_DIVISOR=$2, PYG_ACCEL_PREFETCH_PRIORITY=$3, features $4" \
          | tee -a "$OUT_DIR/dp_probe.log"
        PYG_ACCEL_RANKS_PER_HOST=$(( gpus / $1 )) PYG_ACCEL_GATHER_PEER_SM_DIVISOR=$2 PYG_ACCEL_PREFETCH_PRIORITY=$3 \
          python3 -m torch.distributed.run --standalone --nproc_per_node "$gpus" \
          scripts/profile_step.py --loop --graph --tf32 --features "$4" 2>&1 | grep '^rank 0' \
          | tee -a "$OUT_DIR/dp_probe.log"
      done
      NCCL_DEBUG=INFO python3 -m torch.distributed.run --standalone --nproc_per_node 2 scripts/nccl_probe.py 2>&1 \
        | grep -E 'via|NCCL version|nccl_probe' | sort -u | head -20 | tee -a "$OUT_DIR/dp_probe.log" ;;
    papers_multi)  # papers100M's size on every GPU of the machine: each process generates the graph onto its GPU
      # and keeps its block of the features, in bfloat16 (7 GB of 28 on each of 4 GPUs)
      run papers_multi python3 -m torch.distributed.run --standalone --nproc_per_node "$(nvidia-smi -L | wc -l)" \
        examples/multi_gpu.py --dataset synthetic-papers100M --large --bf16 --tf32 --epochs 3 \
        --out "$OUT_DIR/example_papers_multi" ;;
    scaling)  # 1, 2, 4 GPUs: data-parallel products-size SAGE (features sharded, then replicated), then
      # full-graph GCN (benchmarks/scaling.py)
      run scaling python3 benchmarks/scaling.py --nprocs 1 2 4 --out "$OUT_DIR" -- --dataset synthetic-products \
        --hidden 256 --layers 3 --num-neighbors 15,10,5 --epochs 5 --tf32
      run scaling_replicated python3 benchmarks/scaling.py --nprocs 1 2 4 --out "$OUT_DIR/replicated" -- \
        --dataset synthetic-products --hidden 256 --layers 3 --num-neighbors 15,10,5 --epochs 5 --tf32 \
        --features replicated
      run scaling_full_graph python3 benchmarks/scaling.py --examples full_graph_multi_gpu --nprocs 1 2 4 \
        --out "$OUT_DIR/full" -- --dataset synthetic-products --epochs 20
      run scaling_full_graph_bf16 python3 benchmarks/scaling.py --examples full_graph_multi_gpu --nprocs 1 2 4 \
        --out "$OUT_DIR/full_bf16" -- --dataset synthetic-products --epochs 20 --exchange-dtype bf16 ;;
    wholegraph)  # NVIDIA's pylibwholegraph beside our sharded gather, every GPU (carry .wholegraph-wheels alone:
      # with .gpu-wheels the carry passes the device tool's 64 MiB)
      python3 -m pip install -q --no-deps --no-index --target /tmp/wholegraph .wholegraph-wheels/*.whl
      run wholegraph env PYTHONPATH="$PYTHONPATH:/tmp/wholegraph" python3 -m torch.distributed.run --standalone \
        --nproc_per_node "$(nvidia-smi -L | wc -l)" benchmarks/sharded_gather.py --wholegraph \
        --out "$OUT_DIR/wholegraph" ;;
    fullgraph)  # two or more GPUs: full-graph training across them (tests, example, benchmark)
      run fullgraph_tests python3 -m pytest tests/test_full_graph.py tests/test_reorder.py tests/test_example.py \
        -k "full_graph or halo or partition or reorder or order" -q -rs -p no:cacheprovider
      run fullgraph_example python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
        examples/full_graph_multi_gpu.py --epochs 50 --out "$OUT_DIR/example_full_graph"
      run fullgraph_bench python3 -m torch.distributed.run --standalone --nproc_per_node "$(nvidia-smi -L | wc -l)" \
        benchmarks/full_graph.py --out "$OUT_DIR" ${PYG_ACCEL_FULLGRAPH_ARGS:---exchange-dtypes fp32 bf16} ;;
    sparse) run sparse python3 benchmarks/sparse.py --preset products --reps 5 --out "$OUT_DIR" ;;
    adjoint) run adjoint python3 benchmarks/spmm_adjoint.py --out "$OUT_DIR" ;;
    max)  # the full graph, then one of a sampled batch's size: each path, and min / mean beside their old forms
      run max python3 scripts/max_timing.py --paths --forms --out "$OUT_DIR"
      run max_small python3 scripts/max_timing.py --scale 0.01 --paths --forms --out "$OUT_DIR/max_small" ;;
    cache) run cache python3 benchmarks/feature_cache.py --out "$OUT_DIR" ;;
    e2e)  # SAGE 3x256 [15, 10, 5] / 1024 against stock PyG tuned and untuned, fp32 and TF32
      run e2e python3 benchmarks/end_to_end.py --configs pyg pyg-0w accel-sampler accel-sync accel accel:tf32 \
        accel-untrimmed --out "$OUT_DIR" ;;
    e2e_step)  # the captured step (TrainStep) beside the eager one, fp32 and TF32, SAGE against stock PyG, then GAT
      run e2e_step python3 benchmarks/end_to_end.py --configs pyg accel-untrimmed accel accel-graph accel:tf32 \
        accel-graph:tf32 --profile-batches 30 --out "$OUT_DIR"
      run e2e_step_gat python3 benchmarks/end_to_end.py --model gat --configs accel accel-graph accel:tf32 \
        accel-graph:tf32 --profile-batches 30 --out "$OUT_DIR" ;;
    hetero_e2e)  # ogbn-mag's task at a tenth of its size: stock PyG tuned, ours eager, ours captured (TrainStep)
      run hetero_e2e python3 benchmarks/hetero_end_to_end.py --scale 0.1 --out "$OUT_DIR" ;;
    hetero_e2e_tf32)  # the same, every configuration's fp32 matrix products on TF32 tensor cores
      run hetero_e2e_tf32 python3 benchmarks/hetero_end_to_end.py --scale 0.1 --tf32 --out "$OUT_DIR" ;;
    hetero_e2e_stores)  # ours (eager, captured) over pyg_accel's stores rather than the HeteroData
      run hetero_e2e_stores python3 benchmarks/hetero_end_to_end.py --scale 0.1 --stores --configs accel accel-graph \
        --epochs 6 --out "$OUT_DIR" ;;
    hetero_e2e_link)  # the same graph and encoder, link prediction of 65,536 author-writes-paper edges
      run hetero_e2e_link python3 benchmarks/hetero_end_to_end.py --scale 0.1 --task link --out "$OUT_DIR" ;;
    e2e_peers)  # the published settings of WholeGraph (fanout 30^3, batch 512) and gSampler ([25, 10], batch 512)
      run e2e_wholegraph_step python3 benchmarks/end_to_end.py --fanout 30 30 30 --batch-size 512 \
        --configs pyg accel accel:tf32 accel-graph:tf32 --max-batches 200 --pyg-steady-batches 40 --profile-batches 20 \
        --out "$OUT_DIR"
      run e2e_gsampler_step python3 benchmarks/end_to_end.py --fanout 25 10 --batch-size 512 --layers 2 \
        --configs pyg accel accel:tf32 accel-graph:tf32 --max-batches 200 --profile-batches 20 --out "$OUT_DIR" ;;
    tta)  # time to stock PyG's accuracy, 3 seeds, SAGE
      run tta python3 benchmarks/time_to_accuracy.py --out "$OUT_DIR" ;;
    tta_gat)  # the same for GAT 4 x 64 (PyG's GAT sets the target: over 5 minutes on one H200, a call of its own)
      run tta_gat python3 benchmarks/time_to_accuracy.py --model gat --out "$OUT_DIR" ;;
    e2e_bf16)  # bf16 autocast with the features stored in bf16 (half the gather bytes), eager and captured
      run e2e_bf16 python3 benchmarks/end_to_end.py --amp --feature-dtype bf16 --configs accel accel-graph \
        --profile-batches 30 --out "$OUT_DIR" ;;
    e2e_compile)  # the model under torch.compile(mode='reduce-overhead', dynamic=True), a few batches
      run e2e_compile python3 benchmarks/end_to_end.py --configs accel-compile:tf32 --max-batches 20 \
        --profile-batches 5 --split-batches 1 --out "$OUT_DIR/compile" ;;
    e2e_untrimmed)  # every configuration untrimmed, then WholeGraph's setting (fewer batches timed)
      run e2e_untrimmed python3 benchmarks/end_to_end.py --no-trim --out "$OUT_DIR"
      run e2e_wholegraph python3 benchmarks/end_to_end.py --fanout 30 30 30 --batch-size 512 --max-batches 100 \
        --pyg-batches 4 --out "$OUT_DIR" ;;
    e2e_pinned)  # the e2e setting with the features in pinned host memory, TF32 then fp32
      run e2e_pinned_tf32 python3 benchmarks/end_to_end.py --features pinned --tf32 --configs accel-sync accel --out "$OUT_DIR"
      run e2e_pinned python3 benchmarks/end_to_end.py --features pinned --configs accel-sync accel --out "$OUT_DIR" ;;
    e2e_pinned_graph)  # the e2e setting with the graph in pinned host memory, then graph and features there
      run e2e_pinned_graph python3 benchmarks/end_to_end.py --graph pinned --configs accel-sync accel --out "$OUT_DIR"
      run e2e_all_pinned python3 benchmarks/end_to_end.py --graph pinned --features pinned --configs accel-sync accel \
        --out "$OUT_DIR" ;;
    e2e_tf32)  # the e2e run with TF32 matmuls in every configuration
      run e2e_tf32 python3 benchmarks/end_to_end.py --tf32 --out "$OUT_DIR" ;;
    e2e_amp)  # the e2e setting in bf16 autocast (every configuration), then with pinned features
      run e2e_amp python3 benchmarks/end_to_end.py --amp --pyg-batches 8 --out "$OUT_DIR"
      run e2e_amp_pinned python3 benchmarks/end_to_end.py --amp --features pinned --configs accel-sync accel \
        --out "$OUT_DIR" ;;
    layers)  # PyG's GATConv and SAGEConv(aggr='max') run out of memory on the full products-size graph:
      # those two also at half size
      run layers python3 benchmarks/layers.py --preset products --widths 64 128 --reps 3 --profile --out "$OUT_DIR"
      run layers_half python3 benchmarks/layers.py --preset products --scale 0.5 --layers GATConv-8h SAGEConv-max \
        --widths 64 128 --reps 3 --profile --out "$OUT_DIR/half"
      # full-graph training: the graph derived from edge_index built once (the memo on)
      run layers_memo python3 benchmarks/layers.py --preset products --layers GCNConv SAGEConv --widths 64 128 \
        --reps 3 --memo --out "$OUT_DIR" ;;
    *) echo "unknown stage $stage"; status=1 ;;
  esac
done
exit $status
