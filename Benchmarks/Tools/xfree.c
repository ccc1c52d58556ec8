// xfree: which heap blocks a process frees on another thread than the one that allocated them.
// A diagnostic for wall time that instructions do not explain (issue 19: `jobkit-bench job` at
// 1M). Not built by any package; build and use it by hand:
//
//   gcc -O2 -shared -fPIC -o /tmp/xfree.so Benchmarks/Tools/xfree.c -ldl
//   XN=100000 LD_PRELOAD=/tmp/xfree.so Benchmarks/.build/release/jobkit-bench --child job 100000
//   XBT=1 ... (also prints two free-site backtraces per size once 50,000 cross frees were seen;
//             resolve `lib(+0xOFFSET)` frames with `addr2line -f -e LIB 0xOFFSET`)
//
// Prints, per task (XN = the task count): allocations per 16-byte size class, how many were freed
// on the allocating thread and how many on another; the threads allocating at least 0.5 blocks
// per task; and (allocating thread → freeing thread, size) pairs. One global spin lock: the
// process runs several times slower, so read counts from it, never times.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <execinfo.h>

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int (*real_memalign)(void **, size_t, size_t);
static char bootstrap[65536]; static size_t boot_used;
static __thread int inside;
#define TBITS 24
#define TSIZE (1u << TBITS)
struct slot { uintptr_t p; uint32_t tid; uint32_t size; };
static struct slot *table;
static volatile int lk;
static uint64_t cross[512], same[512], allocs[512];
struct pair { uint32_t a, f; unsigned b; uint64_t n; };
static int nshown[512];
static struct pair pairs[4096]; static int npairs;
static uint32_t atid[64]; static uint64_t acount[64]; static int nat;
static void count_pair(uint32_t a, uint32_t f, unsigned b){ for (int i=0;i<npairs;i++) if (pairs[i].a==a&&pairs[i].f==f&&pairs[i].b==b){pairs[i].n++;return;} if (npairs<4096){pairs[npairs].a=a;pairs[npairs].f=f;pairs[npairs].b=b;pairs[npairs].n=1;npairs++;} }
static void count_alloc(uint32_t t){ for (int i=0;i<nat;i++) if (atid[i]==t){acount[i]++;return;} if (nat<64){atid[nat]=t;acount[nat]=1;nat++;} }
static void lock(void){ while (__sync_lock_test_and_set(&lk,1)) ; }
static void unlock(void){ __sync_lock_release(&lk); }
static uint32_t mytid(void){ return (uint32_t)syscall(SYS_gettid); }
static void init(void){
  if (real_malloc) return;
  real_malloc = dlsym(RTLD_NEXT,"malloc"); real_free = dlsym(RTLD_NEXT,"free");
  real_calloc = dlsym(RTLD_NEXT,"calloc"); real_realloc = dlsym(RTLD_NEXT,"realloc");
  real_memalign = dlsym(RTLD_NEXT,"posix_memalign");
  table = real_calloc(TSIZE, sizeof(struct slot));
}
static unsigned bucket(size_t s){ size_t b = (s+15)/16; return b >= 511 ? 511 : (unsigned)b; }
static void record(void *p, size_t s){
  if (!p || !table) return;
  uint32_t t = mytid(); uintptr_t k = (uintptr_t)p; uint32_t h = (uint32_t)((k>>4)*2654435761u) & (TSIZE-1);
  lock();
  while (table[h].p && table[h].p != k && table[h].p != 1) h = (h+1)&(TSIZE-1);
  table[h].p = k; table[h].tid = t; table[h].size = (uint32_t)s; allocs[bucket(s)]++; count_alloc(t);
  unlock();
}
static void forget(void *p){
  if (!p || !table) return;
  uint32_t t = mytid(); uintptr_t k = (uintptr_t)p; uint32_t h = (uint32_t)((k>>4)*2654435761u) & (TSIZE-1);
  lock();
  while (table[h].p) { if (table[h].p == k) { unsigned b = bucket(table[h].size); if (table[h].tid == t) same[b]++; else { cross[b]++; count_pair(table[h].tid, t, b); if (cross[b] > 50000 && nshown[b] < 2 && getenv("XBT")) { nshown[b]++; void *bt[14]; int n = backtrace(bt, 14); fprintf(stderr, "--- cross free size %u\n", b*16); backtrace_symbols_fd(bt, n, 2); } } table[h].p = 1; break; } h = (h+1)&(TSIZE-1); }
  unlock();
}
void *malloc(size_t s){ if (!real_malloc) { if (inside) { void *r = bootstrap+boot_used; boot_used += (s+15)&~15; return r; } inside=1; init(); inside=0; } void *r = real_malloc(s); if (!inside){inside=1; record(r,s); inside=0;} return r; }
void *calloc(size_t n, size_t s){ if (!real_calloc) { if (inside) { void *r = bootstrap+boot_used; boot_used += (n*s+15)&~15; memset(r,0,n*s); return r; } inside=1; init(); inside=0; } void *r = real_calloc(n,s); if (!inside){inside=1; record(r,n*s); inside=0;} return r; }
void free(void *p){ if ((char*)p >= bootstrap && (char*)p < bootstrap+sizeof bootstrap) return; if (!real_free) init(); if (!inside){inside=1; forget(p); inside=0;} real_free(p); }
void *realloc(void *p, size_t s){ if (!real_realloc) init(); if (!inside){inside=1; forget(p); inside=0;} void *r = real_realloc(p,s); if (!inside){inside=1; record(r,s); inside=0;} return r; }
int posix_memalign(void **m, size_t a, size_t s){ if (!real_memalign) init(); int r = real_memalign(m,a,s); if (!r && !inside){inside=1; record(*m,s); inside=0;} return r; }
__attribute__((destructor)) static void report(void){
  const char *n = getenv("XN"); double N = n ? atof(n) : 1;
  fprintf(stderr, "size  allocs/task  freed-same/task  freed-other-thread/task\n");
  for (int b = 0; b < 512; b++) if (allocs[b]/N >= 0.05) fprintf(stderr, "%4d  %6.2f  %6.2f  %6.2f\n", b*16, allocs[b]/N, same[b]/N, cross[b]/N);
  for (int i=0;i<nat;i++) if (acount[i]/N >= 0.5) fprintf(stderr, "thread %u allocs/task %.2f\n", atid[i], acount[i]/N);
  for (int i=0;i<npairs;i++) if (pairs[i].n/N >= 0.1) fprintf(stderr, "alloc %u -> free %u size %u: %.2f/task\n", pairs[i].a, pairs[i].f, pairs[i].b*16, pairs[i].n/N);
}
