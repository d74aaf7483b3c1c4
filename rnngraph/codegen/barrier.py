"""A grid barrier from an atomic counter, for persistent loop kernels (``codegen/loop.py``).

numba's ``cuda.cg.this_grid().sync()`` calls ``cudaCGSynchronize`` of the CUDA device runtime
(cudadevrt). This is the classic alternative: a sense-reversing barrier on two int32 words of a
global buffer ``BAR`` = [arrived, generation], zero before the first launch and self-resetting
(the last block to arrive sets ``arrived`` back to 0 and then bumps ``generation``), so one buffer
serves every launch of every kernel that runs on the same stream (not two kernels at once).

Memory ordering: every thread of the block has finished the level when thread 0 passes the
first ``syncthreads``; thread 0's ``threadfence`` before its arrival publishes the block's global
writes (release), and the one after its wait orders the block's later reads after every other
block's writes (acquire); the closing ``syncthreads`` holds the rest of the block until then.
"""

BARRIER_SOURCE = '''
@cuda.jit(device=True, inline=True)
def grid_barrier(BAR, nblocks):
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        gen = cuda.atomic.add(BAR, 1, 0)
        cuda.threadfence()
        if cuda.atomic.add(BAR, 0, 1) == nblocks - 1:
            cuda.atomic.exch(BAR, 0, 0)
            cuda.threadfence()
            cuda.atomic.add(BAR, 1, 1)
        else:
            while cuda.atomic.add(BAR, 1, 0) == gen:
                pass
        cuda.threadfence()
    cuda.syncthreads()
'''
