// Kafka 4.4's own streams-group task assignor (StickyTaskAssignor), timed on the group shapes
// bench/streams_assignor.py gives it, so that our assignor is measured against Kafka's in the
// same run. Compiled and run by that benchmark against Kafka's jars; not part of the product.
//
// Arguments: members subtopologies partitions standbys rounds. Prints one JSON object: the
// median milliseconds of a first assignment and of a reassignment after one member left (the
// others keep their tasks as current), and the counts the assignments came out with.

import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.AssignmentConfigsImpl;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.MemberMetadataAndStateImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

public final class StreamsAssignorBench {
    public static void main(String[] args) {
        int members = Integer.parseInt(args[0]);
        int subtopologies = Integer.parseInt(args[1]);
        int partitions = Integer.parseInt(args[2]);
        int standbys = Integer.parseInt(args[3]);
        int rounds = Integer.parseInt(args[4]);
        List<String> ids = new ArrayList<>();
        for (int s = 0; s < subtopologies; s++) ids.add("s" + s);
        TopologyDescriber topology = new TopologyDescriber() {
            public List<String> subtopologies() { return ids; }
            public int maxNumInputPartitions(String s) { return partitions; }
            public boolean isStateful(String s) { return Integer.parseInt(s.substring(1)) % 2 == 1; }
        };
        AssignmentConfigsImpl configs = AssignmentConfigsImpl.DEFAULT.withNumStandbyReplicas(standbys);
        StickyTaskAssignor assignor = new StickyTaskAssignor();

        Map<String, MemberMetadataAndStateImpl> fresh = new HashMap<>();
        for (int m = 0; m < members; m++) fresh.put("m" + m, member("p" + m, Map.of(), Map.of()));
        GroupAssignment first = assignor.assign(new GroupSpecImpl(fresh, configs), topology);
        Map<String, MemberMetadataAndStateImpl> afterLeave = new HashMap<>();
        for (int m = 1; m < members; m++) {
            MemberAssignment a = first.members().get("m" + m);
            afterLeave.put("m" + m, member("p" + m, a.activeTasks(), a.standbyTasks()));
        }
        GroupAssignment second = assignor.assign(new GroupSpecImpl(afterLeave, configs), topology);

        double[] firstMs = new double[rounds];
        double[] leaveMs = new double[rounds];
        for (int warm = 0; warm < 3; warm++) {
            assignor.assign(new GroupSpecImpl(fresh, configs), topology);
            assignor.assign(new GroupSpecImpl(afterLeave, configs), topology);
        }
        for (int r = 0; r < rounds; r++) {
            long t0 = System.nanoTime();
            assignor.assign(new GroupSpecImpl(fresh, configs), topology);
            long t1 = System.nanoTime();
            assignor.assign(new GroupSpecImpl(afterLeave, configs), topology);
            long t2 = System.nanoTime();
            firstMs[r] = (t1 - t0) / 1e6;
            leaveMs[r] = (t2 - t1) / 1e6;
        }
        System.out.println("{\"first_assignment_ms\": " + median(firstMs)
            + ", \"after_a_leave_ms\": " + median(leaveMs)
            + ", \"max_active_per_member\": " + maxActive(first)
            + ", \"standby_tasks\": " + standbyCount(first)
            + ", \"moved_after_a_leave\": " + moved(first, second) + "}");
    }

    private static MemberMetadataAndStateImpl member(
        String process, Map<String, Set<Integer>> active, Map<String, Set<Integer>> standby
    ) {
        return new MemberMetadataAndStateImpl(
            Optional.empty(), Optional.empty(), process, Map.of(), active, standby, Map.of(), Map.of(), Map.of()
        );
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    private static int maxActive(GroupAssignment a) {
        int max = 0;
        for (MemberAssignment m : a.members().values()) {
            max = Math.max(max, m.activeTasks().values().stream().mapToInt(Set::size).sum());
        }
        return max;
    }

    private static int standbyCount(GroupAssignment a) {
        int n = 0;
        for (MemberAssignment m : a.members().values()) {
            n += m.standbyTasks().values().stream().mapToInt(Set::size).sum();
        }
        return n;
    }

    // active tasks of the members that stayed that are no longer theirs
    private static int moved(GroupAssignment before, GroupAssignment after) {
        int n = 0;
        for (Map.Entry<String, MemberAssignment> e : after.members().entrySet()) {
            MemberAssignment was = before.members().get(e.getKey());
            for (Map.Entry<String, Set<Integer>> t : was.activeTasks().entrySet()) {
                Set<Integer> now = e.getValue().activeTasks().getOrDefault(t.getKey(), Set.of());
                for (int p : t.getValue()) if (!now.contains(p)) n++;
            }
        }
        return n;
    }
}
