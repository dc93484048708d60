set -x
nvidia-smi -L; python3 -c "import numba, numba_cuda, numpy, torch; print(numba.__version__, numpy.__version__, torch.__version__, torch.cuda.is_available())"
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
timeout 170 python3 bench/bench_gpu.py --conv --steps 10 --json $OUT/gpu.json 2>&1 | tail -40
timeout 150 python3 tune_cudaconv/sweep.py $OUT/sweep.json 2>&1 | tail -60
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/cuda/test_cuda_conv_implicit.py -k "kernels or epilogue or module" 2>&1 | tail -15
