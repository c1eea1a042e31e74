/* The MR key table: random keys, lookups, and many register/deregister
 * cycles (tombstones must not fill the table: that once hung). */
#include "mem.h"
#include "t.h"

T_CASE(insert_lookup_remove)
{
	struct uroce_mr_table t;
	static struct uroce_mr mrs[1000];

	T_EQ_INT(uroce_mr_table_init(&t), 0);
	for (int i = 0; i < 1000; i++)
		T_EQ_INT(uroce_mr_insert(&t, &mrs[i]), 0);
	for (int i = 0; i < 1000; i++) {
		T_EQ_PTR(uroce_mr_lookup(&t, mrs[i].ibmr.lkey), &mrs[i]);
		T_EQ_U64(mrs[i].ibmr.lkey, mrs[i].ibmr.rkey);
		for (int j = 0; j < i; j += 97)
			T_NE_INT(mrs[i].ibmr.lkey, mrs[j].ibmr.lkey);
	}
	for (int i = 0; i < 1000; i += 2)
		uroce_mr_remove(&t, &mrs[i]);
	for (int i = 0; i < 1000; i++)
		T_EQ_PTR(uroce_mr_lookup(&t, mrs[i].ibmr.lkey), i % 2 ? &mrs[i] : NULL);
	T_EQ_PTR(uroce_mr_lookup(&t, 0), NULL);
	uroce_mr_table_fini(&t);
}

T_CASE(many_register_cycles_terminate)
{
	struct uroce_mr_table t;
	static struct uroce_mr keep[10], cyc;

	T_EQ_INT(uroce_mr_table_init(&t), 0);
	for (int i = 0; i < 10; i++)
		T_EQ_INT(uroce_mr_insert(&t, &keep[i]), 0);
	for (int i = 0; i < 200000; i++) {
		T_EQ_INT(uroce_mr_insert(&t, &cyc), 0);
		T_EQ_PTR(uroce_mr_lookup(&t, cyc.ibmr.lkey), &cyc);
		uroce_mr_remove(&t, &cyc);
	}
	for (int i = 0; i < 10; i++)
		T_EQ_PTR(uroce_mr_lookup(&t, keep[i].ibmr.lkey), &keep[i]);
	T_LE_INT(t.cap, 1024);
	uroce_mr_table_fini(&t);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
