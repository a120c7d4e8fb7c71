/*
 * hello_mpi -- MPI_Init and MPI_Finalize only: the MPI counterpart of
 * hello_plait for bench/startup.sh.
 */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Finalize();
    return 0;
}
