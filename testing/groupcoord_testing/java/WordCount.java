// Kafka Streams' word count (the quickstart's WordCountDemo) for the streams-group tests, run by
// the JDK's source launcher on Kafka 4.4's jars: lines -> words, regrouped by word (a repartition
// topic), counted in a state store (its changelog), the counts written to the output topic.
// Arguments: bootstrap application.id input output state.dir group.protocol [processing.guarantee].
// Prints one line per state change ("STATE RUNNING") and per assignment ("TASKS 0_0 1_1 ...") on
// stdout; SIGTERM closes it, leaving the group.
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

public class WordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[5]);
        if (args.length > 6) props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[6]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .groupBy((key, word) -> word)
            .count()
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) {
                TreeSet<String> tasks = new TreeSet<>();
                streams.metadataForLocalThreads().forEach(t -> t.activeTasks().forEach(a -> tasks.add(a.taskId().toString())));
                System.out.println("TASKS " + String.join(" ", tasks));
            }
            System.out.flush();
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // leave the group as it closes (with the classic protocol too: an offline migration
            // to streams needs the classic group empty)
            streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(20)));
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
