source bench/gpu_env.sh > /dev/null 2>&1; export PYTHONPYCACHEPREFIX=/tmp/pyc; unset PYTHONDONTWRITEBYTECODE
G=$(nvidia-smi -L | grep -q H200 && echo h200 || echo h100); D=20261205
echo "GPU $G"
timeout 200 python3 bench/startup.py --models 2x512-s64 --steps 300 --pycache-prefix /tmp/pyc2 --precision fp32 --out $OUT/$G-$D-startup-and-step-s64-300-steps.json 2>&1 | grep -v Warn | tail -12
timeout 120 python3 bench/lm_vs_torch.py --impl rnngraph,torch --layers 2 --hidden 512 --embed 128 --streams 64 --window 100 --steps 1000 --minutes 0 --eval-every 100000 --eval-tokens 5000 --out $OUT/$G-$D-lm-vs-torch-2x512-s64-1000-steps.json 2>&1 | grep -v Warn | tail -5
