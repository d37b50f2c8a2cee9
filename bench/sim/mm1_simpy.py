"""The M/M/1 model of bench/sim/mm1.ts in SimPy 3 (Debian python3-simpy3), written the SimPy way: a source process
that creates one process per customer, a Resource of capacity 1 as the FIFO server, and waits measured from arrival
to the grant of the server's request.

    python3 bench/sim/mm1_simpy.py [customers] [seed]   prints {"customers", "meanWait", "wallMs"}
"""
import json
import random
import sys
import time

import simpy

ARRIVAL_RATE = 1.0
SERVICE_RATE = 1.1


def run(customers, seed):
    started = time.perf_counter()
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    arrivals = random.Random(seed)
    services = random.Random(seed + 1)
    stats = {"served": 0, "total_wait": 0.0}

    def customer():
        arrived_at = env.now
        with server.request() as request:
            yield request
            stats["total_wait"] += env.now - arrived_at
            stats["served"] += 1
            yield env.timeout(services.expovariate(SERVICE_RATE))

    def source():
        for _ in range(customers):
            yield env.timeout(arrivals.expovariate(ARRIVAL_RATE))
            env.process(customer())

    env.process(source())
    env.run()
    served = stats["served"]
    return {
        "customers": served,
        "meanWait": stats["total_wait"] / served if served else 0.0,
        "wallMs": (time.perf_counter() - started) * 1000.0,
    }


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    print(json.dumps(run(count, seed)))
