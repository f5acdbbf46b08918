/* A real MPI job across the loopback cluster's nodes, independent of the module tree:
 * built with the distribution's mpicc by the cluster tests (never committed as a binary).
 *
 * Every rank prints its host; rank 0 checks an allreduce and times a ping-pong with
 * the first rank on another host (1 B latency, 1 MiB bandwidth).  Exit 1 on a wrong sum.
 *
 *   smoke rank=3 size=8 host=node2
 *   smoke allreduce sum=28 expected=28
 *   smoke pingpong peer=2 peer_host=node2 bytes=1 latency_us=41.20
 *   smoke pingpong peer=2 peer_host=node2 bytes=1048576 bandwidth_MBps=512.3
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOST_LEN 64

static double pingpong(int rank, int peer, char *buf, int bytes, int iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == peer) {
            MPI_Recv(buf, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - start) / iters / 2; /* one way, seconds */
}

int main(int argc, char **argv)
{
    int rank, size;
    char host[HOST_LEN] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int len;
    MPI_Get_processor_name(host, &len);
    printf("smoke rank=%d size=%d host=%s\n", rank, size, host);
    fflush(stdout);

    char *hosts = malloc((size_t)size * HOST_LEN);
    MPI_Allgather(host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, MPI_COMM_WORLD);

    double mine = rank, sum = 0, expected = (double)size * (size - 1) / 2;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

    int peer = -1;
    for (int r = 1; r < size; r++)
        if (strncmp(hosts + (size_t)r * HOST_LEN, hosts, HOST_LEN) != 0) { peer = r; break; }

    const int big = 1 << 20;
    char *buf = calloc(big, 1);
    if (peer > 0) {
        double lat = pingpong(rank, peer, buf, 1, 200);
        double bw = pingpong(rank, peer, buf, big, 20);
        if (rank == 0) {
            printf("smoke pingpong peer=%d peer_host=%s bytes=1 latency_us=%.2f\n",
                   peer, hosts + (size_t)peer * HOST_LEN, lat * 1e6);
            printf("smoke pingpong peer=%d peer_host=%s bytes=%d bandwidth_MBps=%.1f\n",
                   peer, hosts + (size_t)peer * HOST_LEN, big, big / bw / 1e6);
        }
    }
    if (rank == 0)
        printf("smoke allreduce sum=%g expected=%g\n", sum, expected);
    free(buf);
    free(hosts);
    MPI_Finalize();
    return sum == expected ? 0 : 1;
}
