/*
 * efd_explore.h -- named preemption points for the interleaving explorer.
 *
 * The shared-memory protocols (efd_shm.c, efd_futex.c) mark each step that
 * another thread or process could see -- every load, store and CAS of the
 * shared page that the argument depends on, and each side of a system call
 * -- with EFD_POINT("name").  A release build compiles the points to
 * nothing.  The test-only build (-DEFD_EXPLORE, see tests/explore/) turns
 * each into a call to the explorer, which decides there which actor runs
 * next (or that this one dies), and routes futex() and the page lock's
 * "does its holder live?" through the explorer's model of them, so that
 * every schedule of a few actors can be run in turn.
 */
#ifndef EFD_EXPLORE_H
#define EFD_EXPLORE_H

#ifdef EFD_EXPLORE
#  include <stdint.h>
#  include <stdatomic.h>
#  include <time.h>
void efd_explore_point(const char *name);
long efd_explore_futex(_Atomic uint32_t *word, int op, uint32_t val,
                       const struct timespec *timeout);
/* Whether thread `tid` of process `tgid` lives, in the explorer's model
 * (an actor that died at a point is gone at once). */
int efd_explore_alive(long tgid, long tid);
/* The futex backend's death bell (efd_futex.c): the running actor's model
 * of its robust-list head, and futex_waitv on n words, at most 5 (returns
 * the index of the word woken on, or -1 with errno). */
struct robust_list_head *efd_explore_robust_head(void);
long efd_explore_futex_waitv(_Atomic uint32_t *const *words,
                             const uint32_t *vals, int n, int has_timeout);
/* The books (efd_books.c): the running actor's holder slot (its index;
 * -1 for the scheduler), and whether slot s's holder lives. */
int efd_explore_own_slot(void);
int efd_explore_holder_alive(int slot);
/* The holders' watcher (efd_watch.c), modelled: a sleeper enters (the
 * running actor's own word, which the model moves and wakes as a holder
 * it watches dies), watches slot s's holder (0, or ESRCH if it is dead),
 * and leaves (its watches forgotten). */
int efd_explore_watch(int slot);
_Atomic uint32_t *efd_explore_watch_enter(void);
void efd_explore_watch_leave(void);
#  define EFD_POINT(name) efd_explore_point(name)
#else
#  define EFD_POINT(name) ((void)0)
#endif

#endif /* EFD_EXPLORE_H */
